"""Seed 001's int4 row groups ("INT4G<g>") through the grit:: ops and the Python API.

Planes: [codes, scales, empty, empty], codes = ceil(R*C/2) packed bytes, scales
= R*ceil(C/g) binary64 values as raw bytes. packed_linear's numerics: the
weight takes the core's binary64 decode, each product x*w is formed in
binary64 and rounded once to binary32, products are added to a +0.0 float32
accumulator in ascending k (ascending n for grad_input), the bias last.
"""

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

import torch_grit
from torch_grit import Grade, ops
from torch_grit.cli import main as cli_main
from torch_grit.checkpoint.convert import ConvertError, convert
from torch_grit.contract.errors import GradeError, InexpressibleError
from torch_grit.contract.int4_groups import Int4Groups
from torch_grit.nn import GritLinear
from torch_grit.tensor import GritTensor

W = [[-7, -3.5, 0, 3.5], [0.1, 0.2, 0.3, 7]]  # seed 001's fixture matrix
X = [[1.0, 2.0]]                              # its input row: y = x W
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
SHAPE = (24, 40)                              # 24 rows: a ragged 16-row tile
GROUPS = (1, 7, 32, 40)                       # 7 and 32 leave a short final group in a row of 40

# Each product is rounded twice (binary64, then binary32): at most u32 + u64 relative.
PRODUCT_ROUNDOFF = 2.0 ** -24 + 2.0 ** -53
OUT_ROUNDOFF = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def _w(shape=SHAPE, seed=0, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _planes(grade, shape=SHAPE, seed=0):
    return ops.quantize(_w(shape, seed), grade)


def _decode64(grade, planes, shape):
    return torch.ops.grit.dequantize(*planes, grade, list(shape), torch.float64)


# --------------------------------------------------------------------------- seed 001 fixtures

@pytest.mark.parametrize("group, hex_bytes, scales", [
    (4, "C9400070", [1.0, 1.0]),
    (2, "C9707470", [1.0, 0.5, 0.028571428571428574, 1.0]),
])
def test_seed_bytes_from_grit_quantize(group, hex_bytes, scales):
    planes = torch.ops.grit.quantize(torch.tensor(W, dtype=torch.float64), "INT4G%d" % group)
    assert bytes(planes[0].tolist()).hex().upper() == hex_bytes
    assert planes[1].view(torch.float64).tolist() == scales
    assert planes[2].numel() == 0 and planes[3].numel() == 0
    # The seed's storage counts: 4 code bytes, 8 bytes per scale.
    assert (planes[0].numel(), planes[1].numel()) == Int4Groups(group).storage_bytes(2, 4)


def test_seed_short_final_group_and_spellings():
    row = torch.tensor([[-7, -3.5, 0, 3.5, 7]], dtype=torch.float64)
    for spelling in ("INT4G4", "int4g4", " Int4G4\n"):
        planes = torch.ops.grit.quantize(row, spelling)
        assert bytes(planes[0].tolist()).hex().upper() == "C94007"
        assert planes[1].view(torch.float64).tolist() == [1.0, 1.0]


def test_seed_float32_weights_give_the_same_codes():
    planes = ops.quantize(torch.tensor(W, dtype=torch.float32), Grade.int4_groups(2))
    assert bytes(planes[0].tolist()).hex().upper() == "C9707470"


def test_seed_reconstruction_through_dequantize():
    planes = torch.ops.grit.quantize(torch.tensor(W, dtype=torch.float64), "INT4G4")
    assert _decode64("INT4G4", planes, (2, 4)).tolist() == [[-7, -4, 0, 4], [0, 0, 0, 7]]
    planes = torch.ops.grit.quantize(torch.tensor(W, dtype=torch.float64), "INT4G2")
    back = _decode64("INT4G2", planes, (2, 4))
    assert back[1, 0].item() == 0.1142857142857143  # the seed's printed value
    assert back.tolist() == Int4Groups(2).decode((2, 4), *Int4Groups(2).encode(W)).tolist()


def test_dequantize_to_every_dtype_is_the_binary64_decode_cast():
    # Row chunks of the float32 path meet ragged ends (300 rows, odd columns).
    planes = torch.ops.grit.quantize(_w((300, 257), seed=4), "INT4G7")
    exact = _decode64("INT4G7", planes, (300, 257))
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        got = torch.ops.grit.dequantize(*planes, "INT4G7", [300, 257], dtype)
        assert got.dtype == dtype and torch.equal(got, exact.to(dtype)), dtype


@pytest.mark.parametrize("group, seed_y", [
    (4, [-7.0, -4.0, 0.0, 18.0]),
    (2, [-6.771428571428571, -3.6, 0.0, 17.5]),
])
def test_seed_product_through_grad_input(group, seed_y):
    """The seed's y = x W (x contracts over W's rows) is packed_linear_grad_input."""
    planes = torch.ops.grit.quantize(torch.tensor(W, dtype=torch.float64), "INT4G%d" % group)
    y = torch.ops.grit.packed_linear_grad_input(torch.tensor(X), *planes, "INT4G%d" % group, [2, 4])
    assert y.dtype == torch.float32
    # float32 accumulation: the seed's binary64 values to within one float32 rounding per step.
    assert torch.allclose(y.double(), torch.tensor([seed_y], dtype=torch.float64), rtol=2 ** -22, atol=0)
    assert y.tolist() == [_scalar_grad_input(np.array(X, np.float32), _decode64(
        "INT4G%d" % group, planes, (2, 4)).numpy())[0].tolist()]
    if group == 4:
        assert y.tolist() == [seed_y]  # every step exact


# --------------------------------------------------------------------------- opcheck

@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("dtype", DTYPES + (torch.float64,))
def test_opcheck_quantize(group, dtype):
    torch.library.opcheck(torch.ops.grit.quantize.default, (_w(dtype=dtype), "INT4G%d" % group))


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_opcheck_dequantize_and_check(group, dtype):
    grade = "INT4G%d" % group
    planes = _planes(grade)
    torch.library.opcheck(torch.ops.grit.dequantize.default, (*planes, grade, list(SHAPE), dtype))
    torch.library.opcheck(torch.ops.grit.check.default, (*planes, grade, list(SHAPE)))


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape, with_bias", [((3, 5, 40), True), ((1, 40), False), ((0, 40), True)])
def test_opcheck_packed_linear(group, dtype, x_shape, with_bias):
    grade = "INT4G%d" % group
    planes = _planes(grade)
    x = _w(x_shape, seed=1, dtype=dtype).requires_grad_(True)
    bias = _w((SHAPE[0],), seed=2, dtype=dtype).requires_grad_(True) if with_bias else None
    torch.library.opcheck(torch.ops.grit.packed_linear.default, (x, *planes, grade, list(SHAPE), bias))


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_opcheck_packed_linear_grad_input(group, dtype):
    grade = "INT4G%d" % group
    planes = _planes(grade)
    gy = _w((4, SHAPE[0]), seed=3, dtype=dtype).requires_grad_(True)
    torch.library.opcheck(torch.ops.grit.packed_linear_grad_input.default, (gy, *planes, grade, list(SHAPE)))


@pytest.mark.parametrize("rows, cols, group", [(5, 7, 3), (1, 1, 1), (3, 40, 32), (2, 5, 100)])
def test_fake_plane_sizes(rows, cols, group):
    """The fakes give ceil(R*C/2) code bytes and 8*R*ceil(C/g) scale bytes, like the kernel."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    real = torch.ops.grit.quantize(_w((rows, cols)), "INT4G%d" % group)
    with FakeTensorMode():
        fake = torch.ops.grit.quantize(torch.empty(rows, cols), "INT4G%d" % group)
    want = [(rows * cols + 1) // 2, 8 * rows * (-(-cols // group)), 0, 0]
    assert [p.numel() for p in real] == want == [p.numel() for p in fake]
    meta = torch.ops.grit.quantize(torch.empty(rows, cols, device="meta"), "INT4G%d" % group)
    assert [p.numel() for p in meta] == want


# --------------------------------------------------------------------------- numerics

def _scalar_linear(x32, w64, bias32=None):
    """The documented order, one scalar at a time: p = f32(f64(x) * w); acc = f32(acc + p)."""
    m, k = x32.shape
    n = w64.shape[0]
    y = np.empty((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            acc = np.float32(0.0)
            for kk in range(k):
                acc = np.float32(acc + np.float32(np.float64(x32[i, kk]) * w64[j, kk]))
            y[i, j] = np.float32(acc + bias32[j]) if bias32 is not None else acc
    return y


def _scalar_grad_input(gy32, w64):
    m, n = gy32.shape
    k = w64.shape[1]
    gx = np.empty((m, k), np.float32)
    for i in range(m):
        for kk in range(k):
            acc = np.float32(0.0)
            for j in range(n):
                acc = np.float32(acc + np.float32(np.float64(gy32[i, j]) * w64[j, kk]))
            gx[i, kk] = acc
    return gx


@pytest.mark.parametrize("group", (1, 3, 8))
@pytest.mark.parametrize("dtype", DTYPES)
def test_bit_exact_to_the_scalar_order(group, dtype):
    shape, grade = (5, 11), "INT4G%d" % group
    planes = _planes(grade, shape)
    w64 = _decode64(grade, planes, shape).numpy()
    x = _w((3, 11), seed=4, dtype=dtype)
    bias = _w((5,), seed=5, dtype=dtype)
    y = ops.packed_linear(x, planes, grade, shape, bias)
    want = torch.from_numpy(_scalar_linear(x.float().numpy(), w64, bias.float().numpy())).to(dtype)
    assert y.dtype == dtype and torch.equal(y, want)
    gy = _w((3, 5), seed=6, dtype=dtype)
    gx = torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(shape))
    want = torch.from_numpy(_scalar_grad_input(gy.float().numpy(), w64)).to(dtype)
    assert torch.equal(gx, want)


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_float64_reference_within_the_summation_bound(group, dtype):
    """|y - F.linear(x, decode(W))| in float64 is within gamma_n * sum|x w| (n = k + 1
    roundings per output, each at most PRODUCT_ROUNDOFF), plus one rounding to x's dtype."""
    grade = "INT4G%d" % group
    planes = _planes(grade)
    w64 = _decode64(grade, planes, SHAPE)
    x = _w((6, SHAPE[1]), seed=7, dtype=dtype)
    bias = _w((SHAPE[0],), seed=8, dtype=dtype)
    y = ops.packed_linear(x, planes, grade, SHAPE, bias)
    ref = F.linear(x.double(), w64, bias.double())
    mag = F.linear(x.double().abs(), w64.abs(), bias.double().abs())
    n = SHAPE[1] + 1
    gamma = n * PRODUCT_ROUNDOFF / (1 - n * PRODUCT_ROUNDOFF)
    u = OUT_ROUNDOFF[dtype]
    bound = gamma * mag * (1 + u) + u * ref.abs()
    assert ((y.double() - ref).abs() <= bound).all()


def test_results_do_not_depend_on_thread_count():
    grade, shape = "INT4G24", (100, 300)
    planes = _planes(grade, shape)
    x = _w((64, 300), seed=9)
    gy = _w((64, 100), seed=10)
    before = torch.get_num_threads()
    out = {}
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            out[threads] = (ops.packed_linear(x, planes, grade, shape),
                            torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(shape)),
                            _decode64(grade, planes, shape))
    finally:
        torch.set_num_threads(before)
    for a, b in zip(out[1], out[2]):
        assert torch.equal(a, b)


def test_autograd_reaches_x_and_bias():
    grade, shape = "INT4G8", (12, 20)
    planes = _planes(grade, shape)
    x = _w((4, 20), seed=11).requires_grad_(True)
    bias = _w((12,), seed=12).requires_grad_(True)
    y = ops.packed_linear(x, planes, grade, shape, bias)
    gy = _w((4, 12), seed=13)
    y.backward(gy)
    assert torch.equal(x.grad, torch.ops.grit.packed_linear_grad_input(gy, *planes, grade, list(shape)))
    assert torch.allclose(x.grad.double(), gy.double() @ _decode64(grade, planes, shape), rtol=1e-5, atol=1e-6)
    assert torch.equal(bias.grad, gy.sum(0))
    assert all(not p.requires_grad for p in planes)


# --------------------------------------------------------------------------- reader refusals

GOOD = bytes.fromhex("C94007")  # the seed's one-row fixture [-7, -3.5, 0, 3.5, 7] at g=4


def _u8(b):
    return torch.tensor(list(b), dtype=torch.uint8)


def _f64(values):
    return torch.tensor(values, dtype=torch.float64).view(torch.uint8)


EMPTY = torch.empty(0, dtype=torch.uint8)

REFUSALS = [
    ("payload_length", [_u8(GOOD[:2]), _f64([1.0, 1.0]), EMPTY, EMPTY],
     "plane 'data' .*packed codes: expected 3 bytes, found 2 \\(payload_length\\)"),
    ("scale_count", [_u8(GOOD), _f64([1.0]), EMPTY, EMPTY],
     "plane 'scale0' .*scales: expected 2 .*found 1 \\(scale_count\\)"),
    ("scale_bytes", [_u8(GOOD), _f64([1.0, 1.0])[:13], EMPTY, EMPTY],
     "plane 'scale0' holds INT4G4's binary64 scales, 8 bytes each, but has 13 bytes"),
    ("zero_scale", [_u8(GOOD), _f64([1.0, 0.0]), EMPTY, EMPTY],
     "plane 'scale0' .*scale 1 must be finite and positive.*\\(bad_scale\\)"),
    ("negative_scale", [_u8(GOOD), _f64([-1.0, 1.0]), EMPTY, EMPTY],
     "plane 'scale0' .*scale 0 must be finite and positive, found -1.*\\(bad_scale\\)"),
    ("nan_scale", [_u8(GOOD), _f64([float("nan"), 1.0]), EMPTY, EMPTY],
     "plane 'scale0' .*scale 0 must be finite and positive, found nan.*\\(bad_scale\\)"),
    ("inf_scale", [_u8(GOOD), _f64([1.0, float("inf")]), EMPTY, EMPTY],
     "plane 'scale0' .*scale 1 must be finite and positive, found inf.*\\(bad_scale\\)"),
    ("reserved_code", [_u8(bytes.fromhex("C84007")), _f64([1.0, 1.0]), EMPTY, EMPTY],
     "plane 'data' .*reserved code -8 \\(nibble 8\\) at row 0, column 0 \\(reserved_code\\)"),
    ("padding", [_u8(bytes.fromhex("C94017")), _f64([1.0, 1.0]), EMPTY, EMPTY],
     "plane 'data' .*the final high nibble is padding and must be 0.*\\(padding\\)"),
    ("non_finite", [_u8(GOOD), _f64([1e308, 1.0]), EMPTY, EMPTY],
     "planes 'data' and 'scale0' .*non-finite reconstruction at row 0, column 0 \\(non_finite\\)"),
    ("scale1", [_u8(GOOD), _f64([1.0, 1.0]), _u8(b"\x00"), EMPTY],
     "plane 'scale1' must be empty for INT4G4 .*found 1 bytes"),
    ("aux", [_u8(GOOD), _f64([1.0, 1.0]), EMPTY, _u8(b"\x00\x00")],
     "plane 'aux' must be empty for INT4G4 .*found 2 bytes"),
]


@pytest.mark.parametrize("case, planes, message", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_reader_refusals_through_dequantize_and_check(case, planes, message):
    torch.ops.grit.check(_u8(GOOD), _f64([1.0, 1.0]), EMPTY, EMPTY, "INT4G4", [1, 5])  # the good planes pass
    with pytest.raises(ValueError, match="grit::dequantize: " + message):
        torch.ops.grit.dequantize(*planes, "INT4G4", [1, 5], torch.float32)
    with pytest.raises(ValueError, match="grit::check: " + message):
        torch.ops.grit.check(*planes, "INT4G4", [1, 5])
    x = torch.ones(1, 5)
    with pytest.raises(ValueError, match="grit::packed_linear: " + message):
        torch.ops.grit.packed_linear(x, *planes, "INT4G4", [1, 5], None)


def test_each_refusal_has_its_own_message():
    seen = set()
    for _, planes, _ in REFUSALS:
        with pytest.raises(ValueError) as exc:
            torch.ops.grit.check(*planes, "INT4G4", [1, 5])
        seen.add(str(exc.value).split("\n")[0])
    assert len(seen) == len(REFUSALS)


def test_argument_errors():
    planes = _planes("INT4G4", (3, 8))
    with pytest.raises(ValueError, match="packs a non-empty 2-D matrix: argument 'shape'.*found \\[3, 8, 1\\]"):
        torch.ops.grit.dequantize(*planes, "INT4G4", [3, 8, 1], torch.float32)
    with pytest.raises(ValueError, match="found \\[0, 8\\]"):
        torch.ops.grit.quantize(torch.empty(0, 8), "INT4G4")
    with pytest.raises(TypeError, match="plane 'data' must be a uint8 tensor"):
        torch.ops.grit.check(planes[0].int(), *planes[1:], "INT4G4", [3, 8])
    with pytest.raises(ValueError, match="argument 'x' has 7 features"):
        torch.ops.grit.packed_linear(torch.ones(2, 7), *planes, "INT4G4", [3, 8], None)
    with pytest.raises(ValueError, match="non-finite weight at row 1, column 2 \\(non_finite\\)"):
        w = torch.ones(3, 8)
        w[1, 2] = float("inf")
        torch.ops.grit.quantize(w, "INT4G4")
    with pytest.raises(ValueError, match="at most 2\\^62"):
        torch.ops.grit.quantize(torch.ones(3, 8), "INT4G9999999999999999999")
    with pytest.raises(TypeError, match="float32, bfloat16, float16 or float64"):
        torch.ops.grit.quantize(torch.ones(3, 8, dtype=torch.int32), "INT4G4")


# --------------------------------------------------------------------------- the Python API

def test_grit_tensor_planes_and_dequantize():
    w = _w((6, 10))
    t = torch_grit.quantize(w, "INT4G4")
    codes, scales = Int4Groups(4).encode(w.double().numpy())
    assert isinstance(t, GritTensor) and t.grade == Int4Groups(4) and t.is_int4_groups
    assert bytes(t.planes[0].tolist()) == codes
    assert t.planes[1].view(torch.float64).numpy().tolist() == scales.tolist()
    assert t.planes[2].numel() == t.planes[3].numel() == 0
    assert t.nbytes_packed == sum(Int4Groups(4).storage_bytes(6, 10))
    exact = Int4Groups(4).decode((6, 10), codes, scales)
    assert torch.equal(t.dequantize(), torch.from_numpy(exact).float())
    assert torch.equal(_decode64("INT4G4", t.planes, (6, 10)), torch.from_numpy(exact))
    assert "INT4G4" in repr(t)
    with pytest.raises(ValueError, match="no GRIT descriptor: .*binary32"):
        t.descriptor
    # Rebuilt from its planes (checked by the core reader), copied, moved, transposed.
    again = GritTensor.from_planes(t.planes, "int4g4", (6, 10))
    assert torch.equal(again.dequantize(), t.dequantize())
    assert torch.equal(t.clone().dequantize(), t.dequantize())
    assert torch.equal(t.to(torch.bfloat16).dequantize(), torch.from_numpy(exact).bfloat16())
    x = _w((3, 10), seed=1)
    assert torch.equal(x @ t.t(), ops.packed_linear(x, t.planes, "INT4G4", (6, 10)))
    bad = [t.planes[0].clone(), t.planes[1].clone(), t.planes[2], t.planes[3]]
    bad[0][0] = 0x88
    with pytest.raises(ValueError, match="weight: grit::check: plane 'data' .*reserved code"):
        GritTensor.from_planes(bad, "INT4G4", (6, 10), name="weight")


def test_grit_linear_and_quantize_():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    x = _w((4, 10), seed=2)
    reports = torch_grit.quantize_(model, "INT4G4")  # 10 and 6 columns: short final groups
    assert [r.grade for r in reports] == ["INT4G4", "INT4G4"]
    assert all(isinstance(m, GritLinear) for m in (model[0], model[2]))
    h = torch.relu(ops.packed_linear(x, model[0].weight.planes, "INT4G4", (6, 10), model[0].bias))
    want = ops.packed_linear(h, model[2].weight.planes, "INT4G4", (3, 6), model[2].bias)
    assert torch.equal(model(x), want)
    assert "grade=INT4G4" in repr(model[0])
    # state_dict into a fresh layer of the same grade.
    fresh = GritLinear(10, 6, grade=Grade.int4_groups(4))
    fresh.load_state_dict(model[0].state_dict())
    assert torch.equal(fresh(x), model[0](x))
    # Gradients reach the input and the bias.
    x.requires_grad_(True)
    model(x).sum().backward()
    assert x.grad is not None and model[0].bias.grad is not None


def test_compiled_model_equals_eager():
    model = torch.nn.Sequential(torch.nn.Linear(12, 5))
    torch_grit.quantize_(model, "INT4G5")
    x = _w((3, 12), seed=3)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(x), model(x))


def test_script_export_and_report():
    torch.manual_seed(1)
    source = torch.nn.Sequential(torch.nn.Linear(10, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    model = torch.nn.Sequential(torch.nn.Linear(10, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    model.load_state_dict(source.state_dict())
    torch_grit.quantize_(model, "INT4G4")
    x = _w((4, 10), seed=4)
    y = model(x)
    rep = torch_grit.report(source, model)
    assert [(l.grade, l.code_bytes, l.scale_bytes, l.descriptor_bytes) for l in rep.layers] == [
        ("INT4G4", 30, 8 * 6 * 3, 0), ("INT4G4", 9, 8 * 3 * 2, 0)]  # no GRIT descriptor to count
    exported = torch.export.export(model, (x,))
    assert torch.equal(exported.module()(x), y)
    assert torch.equal(torch.jit.script(model)(x), y)  # swaps in ScriptableGritLinear, in place


# --------------------------------------------------------------------------- export refuses

def test_save_refuses_naming_the_tensor(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 4))
    path = tmp_path / "model.safetensors"
    torch_grit.save(model, path)  # an old file that must survive the refusal
    before = path.read_bytes()
    torch_grit.quantize_(model, "INT4G32")
    with pytest.raises(InexpressibleError, match="0.weight: grade INT4G32 cannot be exported as a GRIT "
                                                 "checkpoint: .*binary64 scales.*binary32.*Nothing was written") as exc:
        torch_grit.save(model, path)
    assert exc.value.tensor == "0.weight"
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["model.safetensors"]  # no temporary file left


def _float_checkpoint(tmp_path):
    src = tmp_path / "src.safetensors"
    save_file({"a.bias": torch.zeros(4), "a.weight": _w((4, 8))}, str(src))
    return src


def test_convert_refuses_naming_the_tensor(tmp_path):
    src = _float_checkpoint(tmp_path)
    dst = tmp_path / "out"
    with pytest.raises(ConvertError, match="a.weight: grade INT4G32 cannot be exported .*binary32") as exc:
        convert(src, dst, "INT4G32")
    assert exc.value.reason == "unpackable"
    assert not dst.exists()


def test_cli_quantize_refuses_naming_the_tensor(tmp_path, capsys):
    src = _float_checkpoint(tmp_path)
    dst = tmp_path / "out.safetensors"
    assert cli_main(["quantize", str(src), str(dst), "--grade", "int4g32"]) == 4
    err = capsys.readouterr().err
    assert "a.weight: grade INT4G32 cannot be exported as a GRIT checkpoint" in err and "binary32" in err
    assert not dst.exists()


def test_grit_only_places_say_why():
    """Grade.parse, profile and grade='auto' work on GRIT grades; INT4G is refused with the reason."""
    with pytest.raises(GradeError, match="seed 001's int4 row groups .*binary32") as exc:
        Grade.parse("INT4G32")
    assert exc.value.code == "inexpressible"
    with pytest.raises(ValueError, match="int4 row groups"):
        torch_grit.profile(torch.nn.Linear(8, 4), grades=["INT4G4"])
    with pytest.raises(ValueError, match="int4 row groups"):
        torch_grit.quantize_(torch.nn.Sequential(torch.nn.Linear(8, 4)), "auto", candidates=["INT4G4"])
