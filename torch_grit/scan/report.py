"""The scan's two outputs: text grouped by file and class with a summary
line, and the stable ``--json`` document (schema ``torch_grit.scan/1``)."""

from .findings import SEVERITIES

SCHEMA = "torch_grit.scan/1"


def to_json(report, policy="graded"):
    return {
        "schema": SCHEMA,
        "files": list(report.files),
        "tensors": [r.to_json() for r in report.records],
        "findings": [f.to_json() for f in report.findings],
        "counts": report.counts(),
        "exit_policy": policy,
        "exit_code": report.exit_code(policy),
        "exit_code_graded": report.exit_code("graded"),
        "exit_code_simple": report.exit_code("simple"),
    }


def render(report, policy="graded", max_per_class=5):
    lines = []
    by_file = {}
    for f in report.findings:
        by_file.setdefault(f.path, {}).setdefault(f.cls, []).append(f)
    for path in sorted(by_file):
        lines.append(path)
        classes = by_file[path]
        order = sorted(classes, key=lambda c: (SEVERITIES.index(classes[c][0].severity), c))
        for cls in order:
            items = classes[cls]
            sev = sorted({f.severity for f in items}, key=SEVERITIES.index)
            lines.append("  %s [%s] x%d" % (cls, "/".join(sev), len(items)))
            for f in items[:max_per_class]:
                head = "    %s%s" % (f.tensor + ": " if f.tensor else "", f.message.split("\n")[0])
                lines.append(head)
                for extra in f.message.split("\n")[1:]:
                    lines.append("      " + extra)
                if f.fix:
                    lines.append("      fix: " + f.fix)
            if len(items) > max_per_class:
                lines.append("    ... and %d more (--json lists all)" % (len(items) - max_per_class))
    c = report.counts()
    n_unparseable = len(report.unparseable)
    quantised = sum(1 for r in report.records if r.quantised)
    declared = sum(1 for r in report.records if r.source == "declared")
    lines.append("torch-grit scan: %d file(s) parsed%s, %d tensor(s) (%d quantized: %d declared, %d inferred); "
                 "%d violation(s), %d disagreement(s), %d warning(s); exit %d (%s)"
                 % (report.parsed_files, ", %d unparseable" % n_unparseable if n_unparseable else "",
                    len(report.records), quantised, declared, quantised - declared,
                    c["violation"], c["disagreement"], c["warning"], report.exit_code(policy), policy))
    return "\n".join(lines)
