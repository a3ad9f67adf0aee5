"""Runs a pytest-style test module where pytest is not installed (the lent
GPU machine has no network): a stand-in `pytest` module that knows
mark.parametrize, mark.skipif, fixture, raises and approx-free asserts,
then every test_* function with every parameter combination.

    python benchmarks/gpu_check_runner.py tests/python/test_kernels_cuda.py tests/python/test_int4g_cuda.py
"""

import contextlib
import importlib.util
import itertools
import os
import re
import sys
import traceback
import types


def _stub():
    pt = types.ModuleType("pytest")

    class Mark:
        def parametrize(self, names, values):
            def deco(fn):
                fn.__dict__.setdefault("_params", []).insert(0, ([n.strip() for n in names.split(",")], list(values)))
                return fn
            return deco

        def skipif(self, cond, reason=""):
            def deco(fn):
                if cond:
                    fn._skip = reason
                return fn
            deco._skip = reason if cond else None  # as a module's pytestmark
            return deco

    pt.mark = Mark()
    pt.fixture = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda fn: fn))

    class ExcInfo:
        value = None

    @contextlib.contextmanager
    def raises(exc, match=None):
        info = ExcInfo()
        try:
            yield info
        except exc as e:
            info.value = e
            if match and not re.search(match, str(e)):
                raise AssertionError("%r does not match %r" % (str(e), match))
        else:
            raise AssertionError("did not raise %s" % exc)

    pt.raises = raises
    return pt


def main(paths):
    sys.modules["pytest"] = _stub()
    passed = failed = skipped = 0
    for path in paths:
        p, f, s = run_module(path)
        passed, failed, skipped = passed + p, failed + f, skipped + s
    print("%d passed, %d failed, %d skipped (stand-in runner, no pytest)" % (passed, failed, skipped))
    return 1 if failed else 0


def run_module(path):
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    marks = getattr(mod, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]  # one mark or a list, as pytest takes them
    skip_all = next((m._skip for m in marks if getattr(m, "_skip", None)), None)
    passed = failed = skipped = 0
    for name in sorted(n for n in dir(mod) if n.startswith("test_")):
        fn = getattr(mod, name)
        if skip_all or getattr(fn, "_skip", None):
            skipped += 1
            continue
        grids = getattr(fn, "_params", [])
        combos = itertools.product(*[[dict(zip(ns, v if len(ns) > 1 else (v,))) for v in vals] for ns, vals in grids])
        for combo in combos:
            kwargs = {k: v for d in combo for k, v in d.items()}
            try:
                fn(**kwargs)
                passed += 1
            except Exception:  # noqa: BLE001
                failed += 1
                print("FAILED %s::%s%s" % (path, name, kwargs))
                traceback.print_exc()
    return passed, failed, skipped


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
