"""This process's resident memory as Linux reports it (``/proc/self/status``),
and windows over its peak: what the memory tests and benchmarks measure."""


def status_kib(field):
    """A ``/proc/self/status`` field in KiB ("VmRSS", "VmHWM", "VmData", ...)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError("/proc/self/status has no field %r" % field)


def reset_peak():
    """Start a new peak window: the peak resident set (VmHWM) restarts from the current one
    (``clear_refs`` 5). False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_growth(fn):
    """(fn(), bytes by which the peak resident set rose above the resident set before fn).
    RuntimeError where the peak cannot be reset."""
    if not reset_peak():
        raise RuntimeError("this kernel cannot reset the peak resident set (/proc/self/clear_refs)")
    before = status_kib("VmRSS")
    out = fn()
    return out, (status_kib("VmHWM") - before) * 1024


__all__ = ["status_kib", "reset_peak", "peak_growth"]
