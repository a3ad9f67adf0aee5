"""The Python package's folders are layers: imports run down, never up, and the
import-time graph has no cycle (docs/architecture.md, "The Python package").

Read from the source with ``ast``, so a violation fails here even when the
import happens to work at run time.
"""

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PKG = os.path.join(ROOT, "torch_grit")

# Bottom (0) to top. A module may import its own folder and any folder below it.
RANK = {
    "_native": 0, "_C": 0, "_build_info": 0, "util": 0,
    "contract": 1,
    "ops": 2,
    "tensor": 3,
    "nn": 4,
    "quantization": 5,
    "checkpoint": 6,
    "parallel": 7,
    "scan": 8, "integrations": 8,
    "interop": 9,
    "cli": 10,
    "__init__": 11, "__main__": 11,
}


def _modules():
    """{dotted module name: (path, is_package)} for every .py file of torch_grit."""
    found = {}
    for dirpath, _, names in os.walk(PKG):
        for n in names:
            if n.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, n), ROOT)[:-3].split(os.sep)
                if rel[-1] == "__init__":
                    found[".".join(rel[:-1])] = (os.path.join(dirpath, n), True)
                else:
                    found[".".join(rel)] = (os.path.join(dirpath, n), False)
    found.setdefault("torch_grit._C", (None, False))  # the extension
    found.setdefault("torch_grit._build_info", (None, False))  # written by the build
    return found


MODULES = _modules()


def _layer(mod):
    parts = mod.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _imports(mod):
    """(target module, line, at import time?) for every import of torch_grit in ``mod``."""
    path, is_pkg = MODULES[mod]
    tree = ast.parse(open(path).read(), path)
    package = mod if is_pkg else mod.rsplit(".", 1)[0]
    out = []

    def visit(node, top):
        for child in ast.iter_child_nodes(node):
            lazy = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    if a.name == "torch_grit" or a.name.startswith("torch_grit."):
                        out.append((a.name, child.lineno, top))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    src = ".".join(base + ([child.module] if child.module else []))
                else:
                    src = child.module or ""
                if src != "torch_grit" and not src.startswith("torch_grit."):
                    continue
                for a in child.names:
                    sub = src + "." + a.name
                    out.append((sub if sub in MODULES else src, child.lineno, top))
            visit(child, top and not lazy)

    visit(tree, True)
    return out


def test_every_module_belongs_to_a_known_layer():
    unknown = sorted(m for m in MODULES if _layer(m) not in RANK)
    assert not unknown, "modules outside the layer table in test_layers.py: %s" % unknown


def test_no_import_runs_up_a_layer():
    bad = []
    for mod in MODULES:
        if MODULES[mod][0] is None:
            continue
        here = _layer(mod)
        for target, line, _ in _imports(mod):
            there = _layer(target)
            if RANK[there] > RANK[here] or (RANK[there] == RANK[here] and there != here and 0 < RANK[here] < 10):
                bad.append("%s:%d imports %s (%s above %s)" % (mod, line, target, there, here))
    assert not bad, "\n".join(bad)


def test_nothing_imports_the_package_root():
    bad = ["%s:%d" % (mod, line) for mod in MODULES if MODULES[mod][0] and mod != "torch_grit"
           for target, line, _ in _imports(mod) if target == "torch_grit"]
    assert not bad, "import torch_grit's names from where they live, not from the root: %s" % bad


def test_the_import_time_graph_is_acyclic():
    graph = {}
    for mod in MODULES:
        if MODULES[mod][0] is None:
            continue
        edges = set()
        for target, _, top in _imports(mod):
            if not top:
                continue
            # Importing a.b.c first imports the packages a.b and a, unless the importer is inside them.
            parts = target.split(".")
            for i in range(2, len(parts) + 1):
                anc = ".".join(parts[:i])
                if anc in MODULES and not (mod == anc or mod.startswith(anc + ".")):
                    edges.add(anc)
        graph[mod] = edges
    state, stack = {}, []

    def walk(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                walk(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            walk(m)


def test_the_table_sees_imports():
    """The checks above are only as good as the parser: it must see known edges."""
    targets = {t for t, _, _ in _imports("torch_grit.tensor.linear")}
    assert {"torch_grit.tensor.grit_tensor", "torch_grit.tensor.dispatch",
            "torch_grit.contract.errors"} <= targets
    lazy = {t for t, _, top in _imports("torch_grit.checkpoint.save_load") if not top}
    assert "torch_grit.nn.linear" in lazy
