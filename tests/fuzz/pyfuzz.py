"""What the two atheris harnesses share: a private scratch folder for the
file under test, the scan of it as ``torch-grit scan --deep --json`` runs it,
and a memory ceiling libFuzzer itself cannot give Python.

atheris's libFuzzer accepts -malloc_limit_mb but enforces it only through a
sanitizer's malloc hooks, which a plain CPython has not (measured: a 600 MiB
bytearray passes under -malloc_limit_mb=512). So ``run`` takes the same flag
and caps the address space instead (RLIMIT_AS, soft limit) at what the process
maps after its imports plus that many MiB: an input that makes the reader
allocate more raises MemoryError, which no harness expects, so it is a finding.
-rss_limit_mb works as in C++ (libFuzzer's own RSS thread).
"""

import os
import resource
import shutil
import sys
import tempfile

import atheris

DEFAULT_MALLOC_LIMIT_MB = 512


def scratch_path(prefix, name):
    """A private folder (on tmpfs where there is one) and the file path inside it.

    libFuzzer leaves with exit(), which runs no Python atexit handler, so the
    folder is named by the process id and a later run removes the folders
    of processes that are gone.
    """
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    for old in os.listdir(base):
        pid = old[len(prefix):]
        if old.startswith(prefix) and pid.isdigit() and not os.path.exists("/proc/" + pid):
            shutil.rmtree(os.path.join(base, old), ignore_errors=True)
    folder = os.path.join(base, "%s%d" % (prefix, os.getpid()))
    shutil.rmtree(folder, ignore_errors=True)
    os.mkdir(folder, 0o700)
    return folder, os.path.join(folder, name)


def _limit_mb(argv):
    for arg in argv:
        if arg.startswith("-malloc_limit_mb="):
            return int(arg.split("=", 1)[1])
    return DEFAULT_MALLOC_LIMIT_MB


def cap_address_space(extra_mb):
    """Soft RLIMIT_AS = the current address space + ``extra_mb`` MiB (0: no cap)."""
    if extra_mb <= 0:
        return
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped + (extra_mb << 20)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def scan_file(scan_one, path):
    """The scan of ``path`` by ``scan_one`` (a family reader of torch_grit.scan), then
    its --deep pass, the cross-file checks, the text report and the --json document,
    as the CLI runs them. Unparseable (exit 4) is the expected refusal; anything
    else escapes. The harness imports torch_grit under instrumentation first, so
    the modules used here are the instrumented ones."""
    from torch_grit.util import strict_json
    from torch_grit.scan import Report, Unparseable, render, to_json
    from torch_grit.scan import deep as deep_mod
    from torch_grit.scan.cross import cross_checks

    report, plan = Report(), []
    try:
        scan_one(path, report, plan)
        if plan:
            deep_mod.run(report, path, plan)
    except Unparseable:
        return
    cross_checks(report)
    render(report)
    strict_json.dumps(to_json(report), sort_keys=True)   # what --json prints


def run(test_one_input):
    cap_address_space(_limit_mb(sys.argv))
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
