"""No file torch_grit reads can make it run code: the package never calls a code-executing loader.

Checked on the AST of every .py file under torch_grit/ (comments and docstrings
cannot trip it, aliases such as ``import pickle as p`` are followed):

- pickle / cPickle / dill / marshal / shelve ``load``/``loads``/``Unpickler``/``open``;
- ``torch.load`` without ``weights_only=True`` (a literal True; absent or a variable fails);
- ``eval`` / ``exec`` / ``compile`` / ``__import__`` / ``importlib.import_module`` at all;
- ``yaml.load`` / ``yaml.load_all`` / ``yaml.unsafe_load`` / ``yaml.full_load`` (only ``safe_load``);
- any import of jinja2 or a chat-template renderer (``apply_chat_template``).

The allow-list is empty: no use is justified today. An entry needs the file,
the call and the reason it cannot run code from a file.
"""

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "torch_grit")
ALLOW = {}  # (relative path, dotted call) -> reason

PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "marshal", "shelve", "cloudpickle", "joblib"}
PICKLE_CALLS = {"load", "loads", "Unpickler", "open"}
BUILTINS = {"eval", "exec", "compile", "__import__"}
YAML_BAD = {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all"}
BANNED_IMPORTS = {"jinja2", "jinja"}


def _sources():
    for folder, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(folder, f)
                yield os.path.relpath(p, ROOT), p


def _dotted(node, aliases):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(aliases.get(node.id, node.id))
        return ".".join(reversed(parts))
    return None


def _violations(rel, tree):
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                if a.name.split(".")[0] in BANNED_IMPORTS:
                    yield node.lineno, "import %s" % a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = "%s.%s" % (node.module, a.name)
            if node.module.split(".")[0] in BANNED_IMPORTS:
                yield node.lineno, "from %s import" % node.module
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func, aliases)
        if name is None:
            continue
        mod, _, fn = name.rpartition(".")
        bad = None
        if not mod and fn in BUILTINS:
            bad = name
        elif name in ("importlib.import_module", "builtins.eval", "builtins.exec"):
            bad = name
        elif mod.split(".")[0] in PICKLE_MODULES and fn in PICKLE_CALLS:
            bad = name
        elif mod.split(".")[0] == "yaml" and fn in YAML_BAD:
            bad = name
        elif fn == "apply_chat_template" or "jinja" in name.lower():
            bad = name
        elif name == "torch.load":
            wo = [k for k in node.keywords if k.arg == "weights_only"]
            if not (wo and isinstance(wo[0].value, ast.Constant) and wo[0].value.value is True):
                bad = "torch.load without weights_only=True"
        if bad and (rel, name) not in ALLOW:
            yield node.lineno, bad


def test_the_scan_sees_the_package():
    files = [rel for rel, _ in _sources()]
    assert os.path.join("checkpoint", "safetensors_io.py") in files and os.path.join("scan", "gguf_header.py") in files


def test_no_code_executing_loader_in_torch_grit():
    found = []
    for rel, path in _sources():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        found += ["%s:%d %s" % (rel, line, what) for line, what in _violations(rel, tree)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("src,hit", [
    ("import pickle\npickle.loads(b)", True),
    ("import pickle as p\np.load(f)", True),
    ("from pickle import loads\nloads(b)", True),
    ("import torch\ntorch.load(f)", True),
    ("import torch\ntorch.load(f, weights_only=flag)", True),
    ("import torch\ntorch.load(f, weights_only=True)", False),
    ("eval(text)", True),
    ("exec(code)", True),
    ("import yaml\nyaml.load(s)", True),
    ("import yaml\nyaml.safe_load(s)", False),
    ("import jinja2", True),
    ("tok.apply_chat_template(msgs)", True),
    ("import json\njson.loads(s)", False),
])
def test_the_checker_catches_what_it_claims(src, hit):
    assert bool(list(_violations("x.py", ast.parse(src)))) is hit
