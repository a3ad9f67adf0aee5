"""Tensor parallelism with torch's own parallelize_module / ColwiseParallel /
RowwiseParallel on packed layers: 2 and 4 processes (gloo on the loopback
interface, rendezvous through a file: no port to race for), each rank a
process running tests/python/tp_worker.py, killed after RANK_TIMEOUT
seconds. In one process: the shard cutter (torch_grit/tensor/
shard.py) against the decoded weight, and the backward-only claim of the
product over out_features."""

import copy
import os
import subprocess
import sys
import tempfile
import time

import pytest
import torch
import torch.nn as nn

import torch_grit
from torch_grit.contract.errors import GroupAxisError, UnsupportedOpError
from torch_grit.tensor.shard import cut

WORKER = os.path.join(os.path.dirname(__file__), "tp_worker.py")
RANK_TIMEOUT = 120  # seconds for a whole case; every collective inside has 60


def run_ranks(case, world, *args, expect=None):
    init = tempfile.NamedTemporaryFile(prefix="grit_tp_", delete=False)
    init.close()
    os.unlink(init.name)  # the file store creates it; a stale one would hold another run's keys
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", GLOO_SOCKET_IFNAME="lo")
    # Each rank writes to its own file, not a pipe: a rank that prints much never blocks on a
    # pipe nobody is reading yet.
    logs = [tempfile.TemporaryFile(mode="w+") for _ in range(world)]
    procs = [subprocess.Popen([sys.executable, WORKER, case, str(r), str(world), init.name, *args],
                              stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
             for r, log in enumerate(logs)]
    deadline = time.monotonic() + RANK_TIMEOUT
    try:
        for p in procs:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
            p.wait()
        pytest.fail("%s on %d ranks did not finish in %d s" % (case, world, RANK_TIMEOUT))
    finally:
        outs = []
        for log in logs:
            log.seek(0)
            outs.append(log.read())
            log.close()
    if expect is not None:
        return [(p.returncode, out) for p, out in zip(procs, outs)]
    bad = [(r, p.returncode, out[-3000:]) for r, (p, out) in enumerate(zip(procs, outs)) if p.returncode]
    assert not bad, "\n".join("rank %d exited %d:\n%s" % b for b in bad)


@pytest.mark.parametrize("grade", ["MXFP4", "Q4KS"])
@pytest.mark.parametrize("world", [2, 4])
def test_mlp_colwise_rowwise(grade, world):
    run_ranks("mlp", world, grade, "0")


@pytest.mark.parametrize("grade, src, tile", [("NVF4", "none", "0"), ("I8S24", "0", "0"), ("MXFP4", "0", "1"),
                                              ("INT4G32", "none", "0")])
def test_mlp_other_grades_sources_and_the_tile_layout(grade, src, tile):
    run_ranks("mlp", 2, grade, src, tile)


@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason="NCCL tensor parallelism needs a CUDA device per rank; fewer than 2 are visible")
def test_mlp_on_cuda_with_nccl():
    run_ranks("mlp_cuda", 2, "MXFP4")


def test_a_lone_layer_each_way():
    run_ranks("linear", 2, "MXFP4")


@pytest.mark.parametrize("world", [2, 4])
def test_the_small_llama_under_a_megatron_plan(world):
    run_ranks("llama", world, "MXFP4")


def test_lora_adapters_train_under_the_plan():
    run_ranks("lora", 2, "MXFP4")


def _saved_mlp(path, hidden, inner, grade):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(hidden, inner), nn.ReLU(), nn.Linear(inner, hidden))
    torch_grit.quantize_(m, grade)
    torch_grit.save(m, str(path))
    return str(path)


def test_each_rank_reads_only_its_shards_into_a_meta_skeleton(tmp_path):
    """2 ranks, a 35.7 MB MXFP4 file: each rank's peak RSS grows by at most 0.75x the file."""
    path = _saved_mlp(tmp_path / "big.safetensors", 4096, 8192, "MXFP4")
    run_ranks("load", 2, path, "4096", "8192", "1")


@pytest.mark.parametrize("grade", ["Q4KS", "NVF4"])
def test_a_sharded_load_on_four_ranks(tmp_path, grade):
    path = _saved_mlp(tmp_path / "small.safetensors", 256, 1024, grade)
    run_ranks("load", 4, path, "256", "1024", "0")


def test_ranks_that_read_different_checkpoints_fail_naming_the_tensor(tmp_path):
    a = _saved_mlp(tmp_path / "a.safetensors", 256, 1024, "MXFP4")
    b = str(tmp_path / "b.safetensors")
    torch.manual_seed(9)
    m = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256))
    torch_grit.quantize_(m, "MXFP4")
    torch_grit.save(m, b)
    run_ranks("disagree", 2, a, b)


def test_a_rank_that_cannot_open_the_file_fails_every_rank_at_once(tmp_path):
    a = _saved_mlp(tmp_path / "a.safetensors", 256, 1024, "MXFP4")
    run_ranks("disagree", 2, a, str(tmp_path / "missing.safetensors"))


def test_uneven_shards_load_and_run(tmp_path):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(256, 101))
    torch_grit.quantize_(m, "MXFP4")
    torch_grit.save(m, str(tmp_path / "u.safetensors"))
    run_ranks("uneven", 2, str(tmp_path / "u.safetensors"))


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("ordered", ["0", "1"])
def test_a_rank_that_dies_makes_the_others_fail_not_hang(world, ordered):
    t0 = time.monotonic()
    results = run_ranks("die", world, "MXFP4", ordered, expect="failure")
    took = time.monotonic() - t0
    assert results[-1][0] == 3  # the one that died
    for code, out in results[:-1]:
        assert code == 2 and "failed: " in out, out[-2000:]
    assert took < 60, took  # the collectives' timeout is 10 s; startup is the rest


@pytest.mark.parametrize("world", [2, 4])
def test_full_tensor_of_a_packed_weight_is_the_whole_weight(world):
    run_ranks("full", world)


def test_a_plan_that_splits_a_group_is_refused_on_every_rank():
    run_ranks("refuse", 2, "MXFP4")


# -- transformers' own tensor parallelism over a GRIT folder --------------------------

def _grit_llama_folder(tmp_path, grade, **shape):
    """The small Llama of examples/causal_lm_quality.py, packed by quantize_ and written by
    torch_grit's save_pretrained (a folder from_pretrained loads)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    try:
        from causal_lm_quality import build_model
    finally:
        sys.path.pop(0)
    from torch_grit.integrations.hf import save_pretrained
    model = build_model(**shape)
    torch_grit.quantize_(model, grade)
    save_pretrained(model, str(tmp_path / "grit"))
    return str(tmp_path / "grit")


def test_from_pretrained_with_tensor_parallelism_reads_only_each_ranks_shards(tmp_path):
    """2 ranks, a Llama of hidden 2048 (about 68 MB of MXFP4 planes): each rank reads its spans
    alone, its peak RSS grows by at most 0.75x the packed planes (transformers' own load of the
    float tensors included), and the logits and the gradient to the embeddings are one
    process's."""
    folder = _grit_llama_folder(tmp_path, "MXFP4", hidden=2048, intermediate=8192, layers=2, heads=8)
    run_ranks("hf", 2, folder, "1")


def test_from_pretrained_with_tensor_parallelism_on_four_ranks(tmp_path):
    run_ranks("hf", 4, _grit_llama_folder(tmp_path, "NVF4", hidden=256, intermediate=512, heads=4))


def test_a_tp_plan_that_splits_a_group_is_refused_before_any_read(tmp_path):
    """down_proj's 96 inputs over 2 ranks: 48 columns each, which splits a group of 32."""
    folder = _grit_llama_folder(tmp_path, "MXFP4", hidden=256, intermediate=96, heads=4)
    run_ranks("hf", 2, folder, "0", "model.layers.0.mlp.down_proj")


def test_quantizing_a_float_folder_while_loading_under_a_plan_is_refused(tmp_path):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    try:
        from causal_lm_quality import build_model
    finally:
        sys.path.pop(0)
    build_model(hidden=256, intermediate=512, heads=4).save_pretrained(tmp_path / "float")
    run_ranks("hf", 2, str(tmp_path / "float"), "quantize", "convert the folder once with torch-grit quantize")


def test_a_packed_layer_under_a_style_without_a_twin_is_refused_by_name(tmp_path):
    folder = _grit_llama_folder(tmp_path, "MXFP4", hidden=256, intermediate=512, heads=4)
    run_ranks("hf", 2, folder, "0", "model.layers.0.mlp.down_proj is a packed layer, and the tp_plan gives it "
              "the style 'packed_rowwise'", '{"model.layers.*.mlp.down_proj": "packed_rowwise"}')


# -- in one process -----------------------------------------------------------------

CUT_GRADES = [("MXFP4", 256), ("NVF4", 256), ("Q4KS", 512), ("I8S24", 256), ("U4Z_G128", 256),
              ("INT4G32", 250)]


@pytest.mark.parametrize("grade, cols", CUT_GRADES)
def test_cuts_are_the_decoded_weights_blocks(grade, cols):
    W = torch_grit.quantize(torch.randn(40, cols, generator=torch.Generator().manual_seed(3)), grade,
                            name="w")
    D = W.dequantize()
    span = torch_grit.tensor.shard.group_span(W.grade)
    for dim, a, b in [(0, 8, 24), (0, 16, 40), (0, 0, 8), (1, 0, span), (1, span, cols)]:
        S = cut(W, dim, a, b)
        want = D[a:b] if dim == 0 else D[:, a:b]
        assert isinstance(S, torch_grit.GritTensor) and S.grit_name == "w"
        assert torch.equal(S.dequantize().view(torch.int32), want.contiguous().view(torch.int32)), (dim, a, b)
        if not S.is_int4_groups:
            torch_grit.check(S.descriptor, S.planes)  # its own descriptor, level 1


@pytest.mark.parametrize("grade, cols", CUT_GRADES)
def test_cat_joins_cuts_back_into_the_weight(grade, cols):
    """torch.cat of a weight's cuts (rows or columns, on group boundaries) is the weight: the same
    plane bytes, its own descriptor, the same decode."""
    W = torch_grit.quantize(torch.randn(40, cols, generator=torch.Generator().manual_seed(4)), grade, name="w")
    span = torch_grit.tensor.shard.group_span(W.grade)
    for dim, seams in [(0, (8, 24)), (1, (span,))]:
        bounds = (0, *seams, W.logical_shape[dim])
        J = torch.cat([cut(W, dim, a, b) for a, b in zip(bounds, bounds[1:])], dim=dim)
        assert isinstance(J, torch_grit.GritTensor) and J.grit_name == "w"
        assert all(torch.equal(a, b) for a, b in zip(J.planes, W.planes)), (grade, dim)
        if not W.is_int4_groups:
            assert J.descriptor == W.descriptor
            torch_grit.check(J.descriptor, J.planes)
        assert torch.equal(J.dequantize().view(torch.int32), W.dequantize().view(torch.int32))


def test_cat_refuses_what_is_not_one_weight():
    W = torch_grit.quantize(torch.randn(40, 256), "MXFP4", name="fc.weight")
    V = torch_grit.quantize(torch.randn(40, 256), "NVF4")
    with pytest.raises(UnsupportedOpError, match="differ"):
        torch.cat([W, V])
    with pytest.raises(UnsupportedOpError, match="do not join along dim 1"):
        torch.cat([W, W[:8]], dim=1)
    with pytest.raises(UnsupportedOpError, match="float tensor"):
        torch.cat([W, torch.randn(8, 256)])
    G = torch_grit.quantize(torch.randn(5, 33), "INT4G32", name="g")
    with pytest.raises(UnsupportedOpError, match="inside a byte"):
        torch.cat([G, G])
    N = torch_grit.quantize(torch.randn(40, 64) * 100, "NVF4")  # another per-tensor scale
    with pytest.raises(UnsupportedOpError, match="per-tensor plane"):
        torch.cat([cut(V, 1, 0, 64), N], dim=1)


def test_split_is_torch_split():
    W = torch_grit.quantize(torch.randn(40, 256), "MXFP4")
    for dim, size in [(0, 16), (1, 64)]:
        parts = torch.split(W, size, dim=dim)
        assert torch.equal(torch.cat([p.dequantize() for p in parts], dim=dim), W.dequantize())
    assert torch.equal(W[8:16].dequantize(), W.dequantize()[8:16])


def test_cuts_that_split_a_group_or_a_byte_are_refused():
    W = torch_grit.quantize(torch.randn(40, 256), "MXFP4", name="fc.weight")
    with pytest.raises(ValueError, match=r"'fc.weight'.*split a group at column 48.*span 32"):
        cut(W, 1, 0, 48)
    S = torch_grit.quantize(torch.randn(40, 256), "S8_CHANNEL", name="fc.weight")
    with pytest.raises(ValueError, match="cannot be sharded by in_features"):
        torch.split(S, 128, dim=1)
    G = torch_grit.quantize(torch.randn(5, 33), "INT4G32", name="g")
    with pytest.raises(ValueError, match="inside a byte"):
        cut(G, 0, 1, 5)
    with pytest.raises(UnsupportedOpError, match="step 2"):
        W[::2]
    with pytest.raises(UnsupportedOpError, match="constant_pad_nd"):
        torch.nn.functional.pad(W, (0, 0, 0, 1))


def test_the_product_over_out_features_runs_only_in_a_backward():
    W = torch_grit.quantize(torch.randn(64, 256), "MXFP4")
    gy = torch.randn(3, 64)
    with pytest.raises(GroupAxisError, match="requantization"):
        torch.ops.aten.mm(gy, W)  # user code, below torch_function: still refused

    g = torch.randn(3, 64)
    out = torch.zeros(3, 256)

    class Grad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, go):
            out.copy_(torch.ops.aten.mm(g, W))
            wt_form = torch.ops.aten.mm(W.t(), g.t()).t()
            assert torch.equal(wt_form, out)
            return torch.zeros(3, 64)

    Grad.apply(torch.randn(3, 64, requires_grad=True)).backward()
    assert torch.equal(out, torch.ops.grit.packed_linear_grad_input(g, *W.planes, W.grade_canonical,
                                                                     list(W.logical_shape)))


def test_layer_methods_that_need_a_whole_weight_say_so_on_a_shard():
    # The DTensor paths themselves run in the rank processes above; here only that a plain
    # layer still reports its grade through packed_weight.
    lin = torch_grit.nn.GritLinear.from_linear(nn.Linear(64, 32), "MXFP4")
    assert lin.packed_weight is lin.weight and lin.grade.name == "GRADE_MXFP4"


def test_the_example_runs_under_torchrun():
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tensor_parallel.py")
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    r = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", script, "--grade", "NVF4"],
                       capture_output=True, text=True, timeout=RANK_TIMEOUT, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "rank 1 holds" in r.stdout and "within the all-reduce bound" in r.stdout, r.stdout
    # The ordered reduction: the whole Llama's logits bit for bit.
    r = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2", script, "--grade", "MXFP4",
                        "--ordered"], capture_output=True, text=True, timeout=RANK_TIMEOUT, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "difference from the unsharded model: 0 (bit for bit)" in r.stdout, r.stdout


@pytest.mark.parametrize("world", [2, 4])
def test_the_ordered_row_wise_reduction_gives_one_process_bits(world):
    grades = "MXFP4,Q4KS,NVF4,I8S24" if world == 2 else "MXFP4,Q4KS"
    run_ranks("ordered", world, grades)


def _halves(grade, n=24, k=512):
    """A weight and the planes of its two column halves (cut on a group boundary)."""
    W = torch_grit.quantize(torch.randn(n, k), grade)
    return W, cut(W, 1, 0, k // 2), cut(W, 1, k // 2, k)


@pytest.mark.parametrize("grade", ["MXFP4", "Q4KS", "NVF4", "I8S24"])
def test_continuing_the_chain_over_the_second_half_is_the_whole_product(grade):
    torch.manual_seed(3)
    W, a, b = _halves(grade)
    bias = torch.randn(W.logical_shape[0])
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(5, 512).to(dtype)
        x[2, 7] = float("nan")
        want = torch.ops.grit.packed_linear(x, *W.planes, W.grade_canonical, list(W.logical_shape), bias)
        op = torch.ops.grit.packed_linear_continue
        acc = torch.zeros(5, 24)
        acc = op(x[:, :256], *a.planes, a.grade_canonical, list(a.logical_shape), acc, None, False)
        assert acc.dtype == torch.float32
        y = op(x[:, 256:], *b.planes, b.grade_canonical, list(b.logical_shape), acc, bias, True)
        assert y.dtype == dtype and torch.equal(y.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                                                want.view(torch.int16 if dtype == torch.bfloat16 else torch.int32))


def test_the_continuation_refuses_what_it_cannot_continue():
    W, a, _ = _halves("MXFP4")
    op = torch.ops.grit.packed_linear_continue
    x = torch.randn(5, 256)
    args = (*a.planes, a.grade_canonical, list(a.logical_shape))
    with pytest.raises(TypeError, match="acc must be float32"):
        op(x, *args, torch.zeros(5, 24, dtype=torch.float64), None, False)
    with pytest.raises(ValueError, match=r"acc must have shape \[5, 24\]"):
        op(x, *args, torch.zeros(24, 5), None, False)
    with pytest.raises(ValueError, match="finishing call only"):
        op(x, *args, torch.zeros(5, 24), torch.zeros(24), False)
    G = torch_grit.quantize(torch.randn(8, 64), "INT4G32")
    with pytest.raises(ValueError, match="INT4G has no group-chain law"):
        op(torch.randn(2, 64), *G.planes, G.grade_canonical, [8, 64], torch.zeros(2, 8), None, True)


def test_the_ordered_style_takes_packed_layers_only(one_rank):
    from torch.distributed.tensor.parallel import parallelize_module

    from torch_grit.parallel import OrderedRowwiseParallel

    with pytest.raises(TypeError, match="applies to GritLinear layers.*found Linear"):
        parallelize_module(nn.Linear(64, 32), one_rank, OrderedRowwiseParallel())
    lin = torch_grit.nn.GritLinear.from_linear(nn.Linear(64, 32), "MXFP4")
    ref = copy.deepcopy(lin)
    parallelize_module(lin, one_rank, OrderedRowwiseParallel())
    x = torch.randn(4, 64)
    assert torch.equal(lin(x), ref(x))


def test_a_layer_planned_ordered_refuses_a_float_weight_at_load(tmp_path, one_rank):
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    from torch_grit import CheckpointError
    from torch_grit.parallel import OrderedRowwiseParallel

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64))
    torch_grit.quantize_(m, "MXFP4", filter_fn=lambda mod, fqn: fqn == "0")
    path = str(tmp_path / "m.safetensors")
    torch_grit.save(m, path)
    with torch.device("meta"):
        skeleton = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64))
    parallelize_module(skeleton, one_rank, {"0": ColwiseParallel(), "2": OrderedRowwiseParallel()},
                       src_data_rank=None)
    with pytest.raises(CheckpointError, match="'2' was parallelized with OrderedRowwiseParallel.*as float"):
        torch_grit.load(path, model=skeleton)
    assert skeleton[0].weight.device.type == "meta"  # nothing installed


@pytest.fixture
def one_rank(tmp_path):
    """A one-process gloo group (a DTensor needs a process group) for in-process checks."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://%s" % (tmp_path / "pg"))
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def _meta_mlp(mesh, hidden=256, inner=512):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    with torch.device("meta"):
        m = nn.Sequential(nn.Linear(hidden, inner), nn.ReLU(), nn.Linear(inner, hidden))
    return parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}, src_data_rank=None)


def test_sharded_load_refusals_change_nothing(tmp_path, one_rank):
    from torch_grit import CheckpointError

    path = _saved_mlp(tmp_path / "m.safetensors", 256, 512, "MXFP4")
    m = _meta_mlp(one_rank)
    with pytest.raises(ValueError, match="verify='digest' reads every plane whole"):
        torch_grit.load(path, model=m, verify="digest")
    wrong = _meta_mlp(one_rank, inner=1024)
    with pytest.raises(CheckpointError, match="does not fit"):
        torch_grit.load(path, model=wrong)
    assert all(p.to_local().device.type == "meta" for p in wrong.parameters())  # nothing half-loaded
    torch_grit.load(path, model=m)
    assert isinstance(m[0], torch_grit.nn.GritLinear) and m[0].packed_weight.logical_shape == (512, 256)
    assert torch.equal(m[2].packed_weight.dequantize(),
                       torch_grit.load(path)["2.weight"].dequantize())


def _untouched(m):
    """No layer swapped, every parameter still on meta: the refused load changed nothing."""
    return (not any(isinstance(x, torch_grit.nn.GritLinear) for x in m.modules())
            and all(p.to_local().device.type == "meta" for p in m.parameters()))


def test_a_refused_float_or_a_meta_leftover_changes_nothing(tmp_path, one_rank):
    from torch_grit import CheckpointError

    path = _saved_mlp(tmp_path / "m.safetensors", 256, 512, "MXFP4")
    state = dict(torch_grit.load(path))
    state["2.bias"] = torch.zeros(255)
    torch_grit.save(state, str(tmp_path / "bad_bias.safetensors"))
    m = _meta_mlp(one_rank)
    with pytest.raises(CheckpointError, match=r"shape \(255,\) in the file, \(256,\) in the model") as e:
        torch_grit.load(str(tmp_path / "bad_bias.safetensors"), model=m)
    assert "2.bias" in str(e.value) and _untouched(m)
    m = _meta_mlp(one_rank)
    m.register_buffer("inv_freq", torch.empty(8, device="meta"), persistent=False)
    with pytest.raises(CheckpointError, match="would stay on the meta device after the load: \\['inv_freq'\\]"):
        torch_grit.load(path, model=m)
    assert _untouched(m)
    m.inv_freq = torch.ones(8)  # built on a real device: the load goes through
    torch_grit.load(path, model=m)
    assert isinstance(m[2], torch_grit.nn.GritLinear)


class _TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 256)
        self.up = nn.Linear(256, 512)
        self.down = nn.Linear(512, 256)
        self.head = nn.Linear(256, 64, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.down(torch.relu(self.up(self.emb(ids)))))


def test_tied_parameters_load_and_stay_tied(tmp_path, one_rank):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    whole = _TiedLM()
    torch_grit.quantize_(whole, "MXFP4", filter_fn=lambda mod, fqn: fqn in ("up", "down"))
    torch_grit.save(whole, str(tmp_path / "tied.safetensors"))
    with torch.device("meta"):
        m = _TiedLM()
    parallelize_module(m, one_rank, {"up": ColwiseParallel(), "down": RowwiseParallel()}, src_data_rank=None)
    torch_grit.load(str(tmp_path / "tied.safetensors"), model=m)  # strict: the alias is not "missing"
    assert m.head.weight is m.emb.weight and torch.equal(m.emb.weight, whole.emb.weight)
    ids = torch.tensor([[1, 5, 9]])
    assert torch.equal(m(ids), whole(ids))


def test_short_positioned_reads_are_continued(tmp_path, one_rank, monkeypatch):
    import torch_grit.parallel.load as sharded

    path = _saved_mlp(tmp_path / "m.safetensors", 256, 512, "Q4KS")
    real, calls = os.preadv, []

    def at_most_5_bytes(fd, buffers, offset):
        calls.append(offset)
        return real(fd, [buffers[0][:5]], offset)

    monkeypatch.setattr(sharded.os, "preadv", at_most_5_bytes)
    m = _meta_mlp(one_rank)
    torch_grit.load(path, model=m)
    monkeypatch.undo()
    whole = torch_grit.load(path)
    assert len(calls) > 100
    for i in ("0", "2"):
        assert torch.equal(m[int(i)].packed_weight.dequantize(), whole[i + ".weight"].dequantize())


def test_whole_weight_features_on_a_parallelized_model_say_why(tmp_path, one_rank):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    torch_grit.quantize_(m, "MXFP4", activations="s8")
    parallelize_module(m, one_rank, {"0": ColwiseParallel(), "2": RowwiseParallel()}, src_data_rank=None)
    with pytest.raises(ValueError, match="a shard runs float activations only"):
        m(torch.randn(2, 256))
    for layer in (m[0], m[2]):
        layer.set_activations_(None)
    assert m(torch.randn(2, 256)).shape == (2, 256)
    with pytest.raises(ValueError, match="0.weight is a tensor-parallel shard"):
        torch_grit.save(m, str(tmp_path / "x.safetensors"))
    assert not os.path.exists(tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="choose the layout before parallelize_module"):
        torch_grit.tile_(m)
    with pytest.raises(TypeError, match="script the model before parallelize_module"):
        torch.jit.script(m)


def test_layers_with_an_input_permutation_are_refused_under_a_plan(one_rank):
    """A GPTQ act-order layer (GritLinear.input_perm) runs whole: the ordered style refuses it
    when the plan is applied, and a sharded one refuses to run, naming the reason."""
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    from torch_grit.parallel import OrderedRowwiseParallel

    layer = torch_grit.nn.GritLinear.from_linear(nn.Linear(64, 32), "MXFP4")
    layer.set_input_perm_(torch.randperm(64))
    with pytest.raises(ValueError, match="permutes its inputs"):
        parallelize_module(copy.deepcopy(layer), one_rank, OrderedRowwiseParallel())
    col = parallelize_module(copy.deepcopy(layer), one_rank, ColwiseParallel())
    with pytest.raises(ValueError, match="input permutation.*tensor-parallel shard"):
        col(torch.randn(2, 64))
    with pytest.raises(ValueError, match="tensor-parallel shard"):
        col.set_input_perm_(torch.randperm(64))
