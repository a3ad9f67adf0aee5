"""Loads torch_grit._C, the compiled extension, and says plainly why when it cannot.

A C++ extension binds to the C++ ABI of the torch it was compiled against; the
build records that torch in ``_build_info.py`` (setup.py writes it beside the
extension), so a different torch minor release is named before the loader
fails on an undefined symbol.
"""

import importlib.util

import torch

REBUILD = "rebuild it under this torch (`make build`, or `pip wheel . --no-build-isolation` for a wheel)"


def _minor(version):
    return tuple(int(p) for p in str(version).split("+")[0].split(".")[:2])


def mismatch(built, running):
    """Why an extension built against torch ``built`` cannot load under ``running``, or None."""
    if built is None or _minor(built) == _minor(running):
        return None
    return ("torch_grit's extension was built against torch %s and this is torch %s: a C++ extension binds "
            "to the torch it was compiled with; %s" % (built, running, REBUILD))


def built_against():
    """The torch version the extension was built against (None: not recorded)."""
    try:
        from . import _build_info
    except ImportError:
        return None
    return getattr(_build_info, "TORCH_VERSION", None)


def load():
    reason = mismatch(built_against(), torch.__version__)
    if reason is not None:
        raise ImportError(reason)
    if importlib.util.find_spec(__package__ + "._C") is None:
        raise ImportError("torch_grit._C, the compiled extension, is not built: run `make build` (or `python "
                          "setup.py build_ext --inplace`) in the repository")
    try:
        from . import _C
        return _C
    except ImportError as e:
        if "undefined symbol" not in str(e):
            raise
        raise ImportError("torch_grit._C does not fit torch %s (built against %s): %s; %s"
                          % (torch.__version__, built_against() or "an unrecorded torch", e, REBUILD)) from e
