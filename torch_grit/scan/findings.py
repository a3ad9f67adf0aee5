"""Finding classes, the report that collects them, and the exit-code policy.

Every finding class has a stable name (the ``class`` field of ``--json``)
and a default severity. Severities order the exit code under the graded
policy: violation (1) before disagreement (2) before warning (3).
"""

VIOLATION = "violation"
DISAGREEMENT = "disagreement"
WARNING = "warning"
SEVERITIES = (VIOLATION, DISAGREEMENT, WARNING)

EXIT_CLEAN, EXIT_STRUCTURAL, EXIT_DISAGREEMENT, EXIT_WARNINGS, EXIT_UNPARSEABLE = 0, 1, 2, 3, 4
EXIT_SIMPLE_CLEAN, EXIT_SIMPLE_FINDINGS, EXIT_SIMPLE_ERROR = 0, 1, 2
POLICIES = ("graded", "simple")

# name -> (default severity, what it means). The names are the stable API.
FINDING_CLASSES = {
    # descriptor versus bytes
    "size": (VIOLATION, "a descriptor's size equations (declared or inferred) disagree with the bytes on disk"),
    "check": (VIOLATION, "the level-1 check refused a declared descriptor (frame, grade or placement)"),
    "check_level2": (VIOLATION, "--deep: the level-2 check refused a declared descriptor's plane bytes"),
    "bad_descriptor": (VIOLATION, "a declared descriptor is not 64 bytes of hex"),
    "truncated": (VIOLATION, "a tensor's bytes run past the end of the file"),
    "blocking": (VIOLATION, "a GGUF tensor's element count is not a multiple of its block size"),
    "family_layout": (VIOLATION, "a GPTQ/AWQ/compressed-tensors module breaks its family's shape/dtype equations"),
    "group_size_mismatch": (VIOLATION, "config.json's group size contradicts the scale planes"),
    "unparseable": (VIOLATION, "one of several inputs could not be parsed (alone, it is exit 4)"),
    # declared versus actual, and identity
    "file_type_mismatch": (DISAGREEMENT, "GGUF general.file_type contradicts the tensor type histogram"),
    "zp_convention_ambiguous": (DISAGREEMENT, "a zero-point plane reads the same under zpc=asis and zpc=minus1"),
    "gid_mismatch": (DISAGREEMENT, "one tensor name carries different gids in different files"),
    "grade_drift": (DISAGREEMENT, "one logical role carries more than one grade in one checkpoint"),
    # labelled inference and honest gaps
    "inferred": (WARNING, "no descriptor: a GRIT contract was inferred from a ggml block type"),
    "format_inferred": (WARNING, "no descriptor: a safetensors quantization family was recognised"),
    "inferred_inexpressible": (WARNING, "recognised, but GRIT v1 cannot name its bytes; reported, never approximated"),
    "unknown_grade": (WARNING, "a declared grade_id that this build does not know"),
    "assumed": (WARNING, "a declared descriptor carries NOTE_ASSUMED (placement asserted, not verified)"),
    "escape_hatch_exposure": (WARNING, "NOTE_ASSUMED descriptors grouped by producer tag"),
    "file_type_unknown": (WARNING, "general.file_type is not a llama_ftype value this build knows"),
    "unknown_ggml_type": (WARNING, "a ggml type id that gguf-py does not know"),
    "partial_quantisation": (WARNING, "float linear weights beside a quantized family, not in config's ignore list"),
    "trailing_bytes": (WARNING, "bytes after the last tensor that no header entry claims"),
}


class Finding:
    """One reported problem: a class, where, what, and the numbers behind it."""

    __slots__ = ("cls", "severity", "path", "tensor", "message", "fix", "data")

    def __init__(self, cls, path, message, tensor=None, fix=None, data=None, severity=None):
        if cls not in FINDING_CLASSES:
            raise ValueError("unknown finding class %r" % cls)
        self.cls = cls
        self.severity = severity or FINDING_CLASSES[cls][0]
        self.path = path
        self.tensor = tensor
        self.message = message
        self.fix = fix
        self.data = dict(data or {})

    def to_json(self):
        out = {"class": self.cls, "severity": self.severity, "path": self.path,
               "tensor": self.tensor, "message": self.message, "data": self.data}
        if self.fix:
            out["fix"] = self.fix
        return out

    def __repr__(self):
        return "Finding(%s, %s, %s::%s)" % (self.cls, self.severity, self.path, self.tensor)


class Report:
    """Everything one scan saw: files, tensor records and findings."""

    def __init__(self):
        self.files = []       # {"path", "container", "parsed", "tensors", "reason"}
        self.records = []     # TensorRecord
        self.findings = []
        self.grade_policies = {}  # path -> torch_grit "grade_policy": grades chosen per tensor

    def add(self, cls, path, message, **kw):
        f = Finding(cls, path, message, **kw)
        self.findings.append(f)
        return f

    @property
    def parsed_files(self):
        return sum(1 for f in self.files if f["parsed"])

    @property
    def unparseable(self):
        return [f for f in self.files if not f["parsed"]]

    def counts(self):
        out = {s: 0 for s in SEVERITIES}
        for f in self.findings:
            out[f.severity] += 1
        return out

    def by_class(self, cls):
        return [f for f in self.findings if f.cls == cls]

    def exit_code(self, policy="graded"):
        nothing_parsed = bool(self.unparseable) and not self.parsed_files
        if policy == "simple":
            if nothing_parsed:
                return EXIT_SIMPLE_ERROR
            return EXIT_SIMPLE_FINDINGS if self.findings else EXIT_SIMPLE_CLEAN
        if policy != "graded":
            raise ValueError("exit policy is 'graded' or 'simple', found %r" % policy)
        if nothing_parsed:
            return EXIT_UNPARSEABLE
        sev = {f.severity for f in self.findings}
        for s, code in ((VIOLATION, EXIT_STRUCTURAL), (DISAGREEMENT, EXIT_DISAGREEMENT),
                        (WARNING, EXIT_WARNINGS)):
            if s in sev:
                return code
        return EXIT_CLEAN
