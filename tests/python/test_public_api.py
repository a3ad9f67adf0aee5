"""The public names users and tests depend on (DESIGN's table) stay put.

Moving a module inside the package must not move or drop a name here, nor its
docstring; the ``torch-grit`` CLI keeps its subcommands.
"""

import inspect

import torch

import torch_grit
from torch_grit.cli import build_parser

PUBLIC = [
    "Grade", "Descriptor", "Placement", "check", "digest", "GritCheckError", "GradeError",
    "encode_planes", "decode_planes", "placement_name",
    "GritTensor", "quantize", "quantize_", "tile_", "untile_", "safe_globals", "nn",
    "save", "load", "CheckpointError", "profile", "report", "GritConfig", "save_pretrained",
]
SUBCOMMANDS = {"import", "export", "grades", "quantize", "profile", "inspect", "scan", "explain"}
OPS = ["quantize", "dequantize", "packed_linear", "packed_linear_grad_input", "check"]


def test_all_is_the_public_list():
    assert list(torch_grit.__all__) == PUBLIC


def test_every_public_name_resolves_and_has_its_own_docstring():
    missing = []
    for name in torch_grit.__all__:
        obj = getattr(torch_grit, name)
        # A class's __doc__ is its own (never inherited); a function's or module's likewise.
        doc = obj.__doc__ if inspect.isclass(obj) or inspect.ismodule(obj) or callable(obj) else None
        if not (doc and doc.strip()):
            missing.append(name)
    assert not missing, "public names without a docstring: %s" % missing


def test_the_names_beyond_all():
    from torch_grit.nn import GritLinear

    assert torch_grit.nn.GritLinear is GritLinear and issubclass(GritLinear, torch.nn.Linear)
    assert callable(torch_grit.quality.causal_lm_nll)
    assert torch_grit.Grade.MXFP4.canonical.startswith("grit1(")
    for op in OPS:
        assert hasattr(torch.ops.grit, op), op
    # Functions named like a job: the function, not a module of that name.
    for name in ("quantize", "profile", "report"):
        assert inspect.isfunction(getattr(torch_grit, name)), name


def test_pickled_names_do_not_move():
    """A torch.save file names GritTensor by module and class; torch_grit.tensor keeps that name."""
    assert torch_grit.GritTensor.__module__ == "torch_grit.tensor"
    import torch_grit.tensor as t

    assert t.GritTensor is torch_grit.GritTensor


def test_cli_subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    assert set(sub.choices) == SUBCOMMANDS
