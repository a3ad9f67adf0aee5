"""Helpers with no knowledge of GRIT: ``strict_json`` (RFC 8259 output)."""
