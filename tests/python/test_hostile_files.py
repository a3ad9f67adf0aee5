"""Every crafted file of tests/corpus/make_corpus.py against torch_grit.load and torch-grit scan.

The corpus is generated once per session. Each tool runs over all files of one
kind in one child process (tests/python/hostile_runner.py) under an address-space
limit (RLIMIT_AS, 2 GiB; python + torch + gguf import in under 1 GiB, measured)
and a timeout, so an unbounded allocation or a hang fails the test instead of
the machine. Per file:

- ``torch_grit.load(path, verify="digest")`` raises CheckpointError or
  GritCheckError (both ValueError), naming the file, and nothing else;
- ``torch-grit scan FILE --json`` exits with the code the manifest gives for the
  class (4: unparseable; 1/3/0 where the header parses, see make_corpus.py),
  prints its JSON document, and no traceback escapes.
"""

import json
import os
import resource
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "corpus"))
import make_corpus  # noqa: E402

AS_LIMIT = 2 << 30
TIMEOUT_S = 60
LOAD_ERRORS = {"CheckpointError", "GritCheckError"}


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    manifest = make_corpus.generate(folder)
    return folder, manifest


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def _run(mode, files):
    proc = subprocess.run([sys.executable, os.path.join(HERE, "hostile_runner.py"), mode, *files],
                          capture_output=True, text=True, timeout=TIMEOUT_S, preexec_fn=_limit)
    assert proc.returncode == 0, "the %s child died (rc %d): %s" % (mode, proc.returncode, proc.stderr[-2000:])
    results = {json.loads(line)["file"]: json.loads(line) for line in proc.stdout.splitlines()}
    assert set(results) == set(files)
    return results


def test_the_corpus_covers_every_class(corpus):
    _, manifest = corpus
    kinds = [e["kind"] for e in manifest]
    assert kinds.count("safetensors") >= 40 and kinds.count("gguf") >= 40
    assert len({e["class"] for e in manifest}) == len(manifest)


# Files of the corpus that are odd, not broken: load takes them.
LOADS = {"gguf_dimension_zero.gguf": "ggml allows empty tensors (ne >= 0) and this one is a plain F32 tensor"}


@pytest.mark.parametrize("kind", ["safetensors", "gguf"])
def test_load_refuses_every_hostile_file_with_a_clear_error(corpus, kind):
    folder, manifest = corpus
    files = [str(folder / e["file"]) for e in manifest if e["kind"] == kind]
    bad = []
    for path, r in _run("load", files).items():
        if os.path.basename(path) in LOADS:
            if r["outcome"] == "raised":
                bad.append("%s: refused, but %s" % (os.path.basename(path), LOADS[os.path.basename(path)]))
            continue
        if r["outcome"] != "raised":
            bad.append("%s: loaded" % os.path.basename(path))
        elif r["type"] not in LOAD_ERRORS or not r["valueerror"]:
            bad.append("%s: %s.%s %s\n%s" % (os.path.basename(path), r["module"], r["type"],
                                             r["message"], r["traceback"]))
        elif not r["names_path"]:
            bad.append("%s: the message does not name the file: %s" % (os.path.basename(path), r["message"]))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("kind", ["safetensors", "gguf"])
def test_scan_gives_the_expected_exit_code_for_every_hostile_file(corpus, kind):
    folder, manifest = corpus
    want = {str(folder / e["file"]): e["scan_exit"] for e in manifest if e["kind"] == kind}
    bad = []
    for path, r in _run("scan", list(want)).items():
        name = os.path.basename(path)
        if r["outcome"] != "exit":
            bad.append("%s: traceback\n%s" % (name, r["stderr"]))
        elif "Traceback" in r["stderr"]:
            bad.append("%s: traceback on stderr\n%s" % (name, r["stderr"]))
        elif r["rc"] != want[path] or not r["json"]:
            bad.append("%s: exit %s (want %d), findings %s, json %s"
                       % (name, r["rc"], want[path], r["classes"], r["json"]))
    assert not bad, "\n".join(bad)


def test_scan_console_script_exits_4_without_a_traceback(corpus):
    """One file through the real entry point (python -m torch_grit), as a user runs it."""
    folder, _ = corpus
    proc = subprocess.run([sys.executable, "-m", "torch_grit", "scan", str(folder / "gguf_huge_n_kv.gguf"),
                           "--json"], capture_output=True, text=True, timeout=TIMEOUT_S, preexec_fn=_limit)
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["exit_code"] == 4
