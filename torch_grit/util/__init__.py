"""Helpers with no knowledge of GRIT: ``strict_json`` (RFC 8259 output), ``peak_memory``
(this process's resident memory and its peak)."""
