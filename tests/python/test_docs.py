"""README.md and docs/ name only things that exist.

Every inline code span and every line of a fenced block in those pages is read
for what it names: a file or folder of the repository (or a build output the
build files name), a make target, a ``torch-grit`` subcommand and its flags, a
pytest test, a GoogleTest suite, a dotted ``torch_grit`` name, a ``torch.ops.grit``
op, and every relative link. A rename that leaves the docs behind fails here.
"""

import glob
import importlib
import os
import re

import pytest
import torch

import torch_grit  # noqa: F401  (registers torch.ops.grit)
from torch_grit.cli import build_parser

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
ROOTS = ("csrc/", "torch_grit/", "tests/", "benchmarks/", "examples/", "scripts/", "docs/", ".ci/",
         "build/", ".venv/", "LICENSE", "Makefile", "CMakeLists.txt", "setup.py", "pyproject.toml",
         "requirements-dev.txt", "README.md")
SOURCE_EXT = (".py", ".cpp", ".h", ".cu", ".cuh", ".inc", ".sh", ".md", ".toml", ".txt")
# Written by the build, not kept in git: named by a build file instead.
BUILD_FILES = ("CMakeLists.txt", "Makefile", "setup.py", "examples/cpp/CMakeLists.txt")
VENV_TOOLS = {"python", "pip", "pytest", "torch-grit", "ninja", "grit-scan"}


def _read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def _snippets(text):
    """(line number, code) for each inline code span and each line of a fenced block."""
    out, fenced = [], False
    for i, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            out.append((i, line.split(" #")[0].strip()))
        else:
            out.extend((i, m) for m in re.findall(r"`([^`]+)`", line))
    return out


def _links(text):
    return [(text[:m.start()].count("\n") + 1, m.group(1))
            for m in re.finditer(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text)]


_MAKE_TARGETS = None


def _make_targets():
    global _MAKE_TARGETS
    if _MAKE_TARGETS is None:
        _MAKE_TARGETS = set(re.findall(r"^([\w-]+):(?!=)", _read("Makefile"), re.M))
    return _MAKE_TARGETS


def _cli():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    return {name: {s for a in p._actions for s in a.option_strings} for name, p in sub.choices.items()}


def _test_names():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "tests", "python", "**", "*.py"), recursive=True):
        names.update(re.findall(r"^\s*def (test_\w+)", open(path, encoding="utf-8").read(), re.M))
    return names


def _gtest_suites():
    suites = set()
    for path in glob.glob(os.path.join(ROOT, "tests", "cpp", "**", "*.cpp"), recursive=True):
        text = open(path, encoding="utf-8").read()
        suites.update(re.findall(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,", text))
        suites.update(re.findall(r"INSTANTIATE_TEST_SUITE_P\(\s*(\w+)\s*,", text))
    return suites


def _path_exists(token):
    token = token.rstrip("/")
    if token.startswith(".venv/bin/"):
        return token[len(".venv/bin/"):] in VENV_TOOLS
    if token.startswith("build/"):
        base = os.path.basename(token).split("*")[0]
        return bool(base) and any(base in _read(f) for f in BUILD_FILES) or token in ("build/cmake", "build")
    if any(c in token for c in "*?["):
        return bool(glob.glob(os.path.join(ROOT, token)))
    if token == "torch_grit/_build_info.py":
        return "_build_info.py" in _read("setup.py")
    return os.path.exists(os.path.join(ROOT, token))


def _resolves(dotted):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return False
        return True
    return False


def _problems(token, ctx):
    """What is wrong with one whitespace-separated token of a snippet (None: nothing)."""
    token = token.strip("\"'(),;:.")
    token = re.sub(r":\d+$", "", token)
    if not token or any(c in token for c in "$<>{}=|") or token.startswith(("-", "http", "~")):
        return None
    if "::" in token and token.split("::", 1)[0].endswith(".py"):
        path, name = token.split("::", 1)
        if not _path_exists(path):
            return "no file %s" % path
        if "def %s" % name.split("[")[0] not in _read(path):
            return "no test %s in %s" % (name, path)
        return None
    if "::" in token:
        return None  # a C++ name (grit::quantize)
    if token.startswith(ROOTS) or (token.endswith(SOURCE_EXT) and "/" in token):
        return None if _path_exists(token) else "no such path"
    if token.endswith(SOURCE_EXT[:7]) and re.fullmatch(r"[\w.-]+", token):
        hits = glob.glob(os.path.join(ROOT, "**", token), recursive=True)
        hits = [h for h in hits if "/.venv/" not in h and "/build/" not in h]
        return None if hits else "no file named %s in the repository" % token
    if re.fullmatch(r"test_\w+", token) and not token.endswith(("_tests", "_test")):
        return None if token in ctx["tests"] else "no pytest test named so"
    if re.fullmatch(r"torch_grit(\.\w+)+", token):
        return None if _resolves(token) else "does not resolve"
    if re.fullmatch(r"torch\.ops\.grit\.\w+", token):
        return None if hasattr(torch.ops.grit, token.rsplit(".", 1)[1]) else "no such op"
    if re.fullmatch(r"[A-Z][A-Za-z0-9]+\.[A-Z][\w]*\*?", token) and ctx.get("gtest_ok", True):
        suite = token.split(".")[0]
        return None if suite in ctx["suites"] else "no GoogleTest suite %s" % suite
    return None


def _check_command(words, ctx):
    """Commands whose words mean something: make targets, torch-grit subcommands and flags."""
    found = []
    if not words:
        return found
    if words[0] == "make":
        for w in words[1:]:
            if "=" in w or w.startswith("-"):
                continue
            if w not in _make_targets():
                found.append("make has no target %s" % w)
    tg = None
    if words[0] == "torch-grit":
        tg = words[1:]
    elif words[:3] in (["python", "-m", "torch_grit"], [".venv/bin/python", "-m", "torch_grit"]):
        tg = words[3:]
    if tg:
        sub = tg[0]
        if sub.startswith("-") or sub.startswith("["):
            return found
        if sub not in ctx["cli"]:
            found.append("torch-grit has no subcommand %s" % sub)
        else:
            for w in tg[1:]:
                flag = w.strip("[]").split("=")[0]
                if flag.startswith("--") and flag not in ctx["cli"][sub]:
                    found.append("torch-grit %s has no flag %s" % (sub, flag))
    for w in words:
        flag = re.match(r"--gtest_filter=['\"]?(\w+)", w)
        if flag and flag.group(1) not in ctx["suites"]:
            found.append("no GoogleTest suite %s" % flag.group(1))
    return found


@pytest.fixture(scope="module")
def ctx():
    return {"cli": _cli(), "tests": _test_names(), "suites": _gtest_suites()}


def test_the_pages_exist():
    expected = {"architecture", "numerics", "checkpoints", "scan", "performance", "cuda"}
    have = {os.path.basename(p)[:-3] for p in PAGES if p.startswith("docs")}
    assert expected <= have, "docs pages missing: %s" % sorted(expected - have)


@pytest.mark.parametrize("page", PAGES)
def test_every_name_in_the_page_exists(page, ctx):
    text = _read(page)
    bad = []
    for line, code in _snippets(text):
        for cmd in re.split(r"\s*(?:&&|;|\|)\s*", code):
            words = cmd.split()
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words = words[1:]  # VAR=value prefixes
            bad += ["%s:%d: `%s`: %s" % (page, line, code, p) for p in _check_command(words, ctx)]
            for w in words:
                p = _problems(w, ctx)
                if p:
                    bad.append("%s:%d: `%s`: %s" % (page, line, w, p))
    for line, target in _links(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(page), target))
        if not os.path.exists(os.path.join(ROOT, path)):
            bad.append("%s:%d: link to %s: no such file" % (page, line, target))
    assert not bad, "\n".join(bad)


def test_the_checker_sees_missing_things(ctx):
    """Each kind of name the pages are read for fails when it does not exist."""
    assert _problems("tests/python/test_no_such_file.py", ctx)
    assert _problems("csrc/grit/no_such.h", ctx)
    assert _problems("no_such_kernel.cpp", ctx)
    assert _problems("test_no_such_test_anywhere", ctx)
    assert _problems("torch_grit.no_such_module", ctx)
    assert _problems("torch.ops.grit.no_such_op", ctx)
    assert _problems("NoSuchSuite.Case", ctx)
    assert _problems("build/cmake/no_such_binary", ctx)
    assert _check_command(["make", "no-such-target"], ctx)
    assert _check_command(["torch-grit", "no-such-command"], ctx)
    assert _check_command(["torch-grit", "scan", "--no-such-flag"], ctx)
    assert _check_command(["make", "demo"], ctx) == []
    assert _problems("tests/python/test_docs.py", ctx) is None
    assert _problems("torch_grit.nn.GritLinear", ctx) is None
    assert _problems("build/cmake/grit_core_tests", ctx) is None


def test_no_tracker_numbers_or_diary_in_project_files():
    """Project files speak of the project as it is: no issue numbers, no sessions."""
    pattern = re.compile(r"\b(issue|tracker item|session) ?#?\d+|\bthis session\b|\(issue \d+\)", re.I)
    bad = []
    for top in ("README.md", "docs", "benchmarks", "torch_grit", "examples", "csrc", "scripts", "tests"):
        for path in [os.path.join(ROOT, top)] if top.endswith(".md") else \
                glob.glob(os.path.join(ROOT, top, "**", "*"), recursive=True):
            if not os.path.isfile(path) or not path.endswith(SOURCE_EXT + (".sh", ".cc")):
                continue
            if os.path.abspath(path) == os.path.abspath(__file__):
                continue
            for i, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                if pattern.search(line):
                    bad.append("%s:%d: %s" % (os.path.relpath(path, ROOT), i, line.strip()[:100]))
    assert not bad, "\n".join(bad)
