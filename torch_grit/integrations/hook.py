"""Register torch_grit with transformers without importing transformers first.

``import torch_grit`` calls ``install()``: when transformers is already
imported, the registration (``integrations.hf.register``) runs at once;
otherwise a meta path finder waits for ``import transformers`` and runs it
right after transformers' own module has executed. A program that never
imports transformers never pays for it.
"""

import importlib.abc
import importlib.machinery
import sys
import warnings

_TARGET = "transformers"


def _register():
    hf = sys.modules.get("torch_grit.integrations.hf")
    if hf is not None and getattr(getattr(hf, "__spec__", None), "_initializing", False):
        return  # transformers is being imported by that package, which registers when done
    try:
        from .hf.register import register
        register()
    except Exception as e:  # the import of transformers itself must not fail because of us
        warnings.warn("torch_grit could not register quant_method 'grit' with transformers: %s: %s"
                      % (type(e).__name__, e), RuntimeWarning, stacklevel=2)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _register()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        _uninstall()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


_FINDER = _Finder()


def _uninstall():
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def install():
    if _TARGET in sys.modules:
        _register()
    elif _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


__all__ = ["install"]
