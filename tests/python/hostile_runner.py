"""Child side of test_hostile_files: run one tool over many crafted files in one process.

Usage: python hostile_runner.py load|scan FILE...
Prints one JSON line per file: {"file", "outcome", ...}. ``load`` records the
exception type (and whether it is a ValueError), ``scan`` the exit code of
``torch-grit scan FILE --json`` and whether a traceback escaped. The parent
sets the address-space limit and the timeout.
"""

import contextlib
import io
import json
import sys
import traceback


def run_load(path):
    import torch_grit

    try:
        torch_grit.load(path, verify="digest")
    except Exception as exc:  # recorded, judged by the parent
        return {"outcome": "raised", "type": type(exc).__name__, "module": type(exc).__module__,
                "valueerror": isinstance(exc, ValueError), "message": str(exc)[:300],
                "names_path": path in str(exc) or path.rsplit("/", 1)[-1] in str(exc),
                "traceback": "".join(traceback.format_exception(exc))[-1500:]}
    return {"outcome": "loaded"}


def run_scan(path):
    from torch_grit import cli

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(["scan", path, "--json"])
            except SystemExit as e:
                rc = e.code
    except Exception:  # what the console script would print as a traceback
        return {"outcome": "traceback", "stderr": traceback.format_exc()[-1500:]}
    doc = None
    try:
        doc = json.loads(out.getvalue())
    except ValueError:
        pass
    return {"outcome": "exit", "rc": rc, "stderr": err.getvalue()[-1500:], "json": doc is not None,
            "classes": sorted({f.get("class") for f in (doc or {}).get("findings", [])} - {None})}


def main():
    mode, files = sys.argv[1], sys.argv[2:]
    fn = {"load": run_load, "scan": run_scan}[mode]
    for path in files:
        res = fn(path)
        res["file"] = path
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
