"""``torch-grit scan``: audit safetensors and GGUF files that nobody annotated.

Declared descriptors (safetensors ``__metadata__["__grit__"]``, GGUF
``grit.desc.<tensor>``) are judged by the C++ core; where none is declared, a
contract is inferred from the ggml block type or the safetensors family
(GPTQ, AWQ, compressed-tensors, bitsandbytes 4-bit) and labelled inferred.
Findings have stable class names (``FINDING_CLASSES``); exit codes follow
the graded policy (0 clean, 1 violation, 2 disagreement, 3 warnings only,
4 nothing parseable) or the simple one (0 clean, 1 findings, 2 nothing parseable).
"""

from .driver import expand, scan_file, scan_paths
from .errors import Unparseable
from .findings import FINDING_CLASSES, Finding, Report
from .report import SCHEMA, render, to_json

__all__ = ["scan_paths", "scan_file", "expand", "Report", "Finding", "FINDING_CLASSES", "Unparseable",
           "render", "to_json", "SCHEMA"]
