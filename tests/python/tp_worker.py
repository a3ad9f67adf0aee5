"""One rank of a tensor-parallel case (test_tensor_parallel.py starts one
process per rank, gloo over the loopback interface, rendezvous through a
file): ``python tp_worker.py CASE RANK WORLD INIT_FILE [ARGS...]``. Exits 0 when every check passes; a failed check
raises (a traceback and exit 1).

Every rank builds the same packed model from the same seed, keeps an
unsharded copy as the reference, parallelizes the other with torch's own
``parallelize_module``, and compares.
"""

import copy
import datetime
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import torch_grit
from torch_grit.nn import GritLinear
from torch_grit.util.peak_memory import reset_peak, status_kib

TIMEOUT = datetime.timedelta(seconds=60)  # every collective; the parent kills the ranks at 120 s
FAULT_TIMEOUT = datetime.timedelta(seconds=10)  # the "die" case's collectives


def mlp(grade, world, tile=False):
    """in 256 -> hidden (256 per rank, so every grade's groups and super-blocks split) -> 128."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(256, 256 * world), nn.ReLU(), nn.Linear(256 * world, 128))
    torch_grit.quantize_(m, grade)   # MXFP4 / NVF4 come back tiled on CPU: the default
    if tile:
        torch_grit.tile_(m)
    else:
        torch_grit.untile_(m)
    return m


def bound(y_ref, scale=64):
    """The float32 summation bound of one all-reduce of partial sums (loose: scale ulps)."""
    return scale * torch.finfo(torch.float32).eps * (y_ref.abs() + 1)


def case_mlp(rank, world, grade, src, tile="0"):
    m = mlp(grade, world, tile == "1")
    ref = copy.deepcopy(m)
    mesh = init_device_mesh("cpu", (world,))
    kw = {} if src == "0" else {"src_data_rank": None}
    parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}, **kw)
    for i, s in (("0", 0), ("2", 1)):
        w = m[int(i)].weight
        assert isinstance(w, DTensor) and w.placements == (Shard(s),), w
        local = m[int(i)].packed_weight
        assert isinstance(local, torch_grit.GritTensor) and local.tiled == (tile == "1"), local
        full = ref[int(i)].weight.dequantize()
        want = full.chunk(world, dim=s)[rank]
        assert torch.equal(local.dequantize(), want), "layer %s: the shard is not the weight's cut" % i
        assert local.grit_name == "%s.weight" % i, local.grit_name
    torch.manual_seed(1 + rank)
    x = torch.randn(3, 5, 256)
    dist.broadcast(x, 0)
    # Column-wise alone: each rank's output columns are the unsharded layer's, bit for bit.
    h = m[0](x)
    h_ref = ref[0](x)
    assert torch.equal(h, h_ref.chunk(world, dim=-1)[rank]), "column-wise output differs"
    # The whole MLP (row-wise all-reduce), forward and backward to x.
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    y, y_ref = m(xa), ref(xb)
    assert y.shape == y_ref.shape and ((y - y_ref).abs() <= bound(y_ref)).all(), (y - y_ref).abs().max()
    gy = torch.randn_like(y_ref)
    dist.broadcast(gy, 0)
    y.backward(gy)
    y_ref.backward(gy)
    assert ((xa.grad - xb.grad).abs() <= bound(xb.grad)).all(), (xa.grad - xb.grad).abs().max()
    # bf16 activations run too.
    with torch.no_grad():
        yb = m(x.bfloat16())
    assert yb.dtype == torch.bfloat16 and yb.shape == y_ref.shape


def case_mlp_cuda(rank, world, grade):
    """The MLP on CUDA with NCCL, one GPU per rank: column-wise outputs bit for bit, the MLP
    within the all-reduce bound (the CUDA kernels' own order, so CUDA against CUDA)."""
    dev = torch.device("cuda", rank)
    m = mlp(grade, world).to(dev)
    ref = copy.deepcopy(m)
    mesh = init_device_mesh("cuda", (world,))
    parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(3, 256, generator=torch.Generator().manual_seed(4)).to(dev)
    assert torch.equal(m[0](x), ref[0](x).chunk(world, dim=-1)[rank])
    y, y_ref = m(x), ref(x)
    assert ((y - y_ref).abs() <= bound(y_ref)).all(), (y - y_ref).abs().max()
    # A sharded load on the CUDA mesh puts everything on the rank's GPU, the LayerNorm outside
    # the plan included.
    whole = nn.Sequential(*mlp(grade, world), nn.LayerNorm(128))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.safetensors")
        torch_grit.save(whole, path)
        with torch.device("meta"):
            skeleton = nn.Sequential(nn.Linear(256, 256 * world), nn.ReLU(), nn.Linear(256 * world, 128),
                                     nn.LayerNorm(128))
        parallelize_module(skeleton, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}, src_data_rank=None)
        torch_grit.load(path, model=skeleton)
    for name, t in list(skeleton.named_parameters()) + list(skeleton.named_buffers()):
        local = t.to_local() if isinstance(t, DTensor) else t
        assert local.device == dev, (name, local.device)
    y, y_ref = skeleton(x), whole.to(dev)(x)
    assert ((y - y_ref).abs() <= bound(y_ref)).all(), (y - y_ref).abs().max()


def case_refuse(rank, world, grade):
    """A row-wise plan that would split a group fails on every rank, before any data moves,
    naming the layer, the group span and the number of shards."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 64))
    torch_grit.quantize_(m, grade)
    mesh = init_device_mesh("cpu", (world,))
    try:
        parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    except ValueError as e:
        text = str(e)
        for part in ("'2.weight'", "groups span 32 columns", "in_features=96 cut into %d shards" % world):
            assert part in text, text
    else:
        raise AssertionError("the plan was not refused")
    dist.barrier()  # every rank got here: nobody hangs in a scatter


def case_full(rank, world):
    """full_tensor() of column-wise and row-wise packed weights (every grade form, a tiled one,
    sharded from memory and loaded into a meta skeleton) is the whole weight: its planes'
    bytes, its descriptor (level 1 checked) and its decode."""
    for grade, cols in (("MXFP4", 256), ("NVF4", 256), ("Q4KS", 256 * world), ("I8S24", 256),
                        ("U4Z_G128", 128 * world), ("INT4G32", 64 * world)):
        torch.manual_seed(1)
        m = nn.Sequential(nn.Linear(cols, 32 * world), nn.ReLU(), nn.Linear(32 * world, cols, bias=False),
                          nn.Linear(cols, 16 * world))
        torch_grit.quantize_(m, grade)
        if grade == "MXFP4":
            m[0].tile_()
        whole = [copy.deepcopy(m[i].weight.data) for i in (0, 3)]
        parallelize_module(m, init_device_mesh("cpu", (world,)), {"0": ColwiseParallel(), "3": RowwiseParallel()},
                           src_data_rank=None)
        for w, i in zip(whole, (0, 3)):
            f = m[i].weight.full_tensor()
            assert isinstance(f, torch_grit.GritTensor) and f.tiled == w.tiled, (grade, i, type(f))
            assert all(torch.equal(a, b) for a, b in zip(f.stored_planes, w.stored_planes)), (grade, i)
            assert torch.equal(f.dequantize().view(torch.int32), w.dequantize().view(torch.int32)), (grade, i)
            if not w.is_int4_groups:
                assert f.descriptor == w.descriptor, (grade, i)
                torch_grit.check(f.descriptor, f.planes)


def case_linear_dtypes(rank, world, grade):
    """A lone GritLinear, column-wise with a DTensor output gathered back: the full output equals
    the unsharded layer's bit for bit; row-wise alone within the all-reduce bound."""
    torch.manual_seed(0)
    lin = GritLinear.from_linear(nn.Linear(512, 64 * world), grade, name="lin.weight")
    mesh = init_device_mesh("cpu", (world,))
    col = parallelize_module(copy.deepcopy(lin), mesh, ColwiseParallel(use_local_output=False))
    row = parallelize_module(copy.deepcopy(lin), mesh, RowwiseParallel())
    x = torch.randn(7, 512)
    dist.broadcast(x, 0)
    y_ref = lin(x)
    assert torch.equal(col(x).full_tensor(), y_ref)
    xs = x.chunk(world, dim=-1)[rank]  # row-wise takes x sharded along in_features
    y = row(xs)
    assert ((y - y_ref).abs() <= bound(y_ref)).all(), (y - y_ref).abs().max()


def case_llama(rank, world, grade):
    """The small Llama of examples/causal_lm_quality.py, packed, under a Megatron-style plan
    (q/k/v/gate/up column-wise, o/down row-wise): the same logits as one process within the
    all-reduce bound."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    from causal_lm_quality import build_model

    model = build_model(hidden=256, intermediate=512, layers=2, heads=4, vocab=256)
    torch_grit.quantize_(model, grade)
    ref = copy.deepcopy(model)
    mesh = init_device_mesh("cpu", (world,))
    plan = {"model.layers.*.self_attn.%s_proj" % p: ColwiseParallel() for p in "qkv"}
    plan.update({"model.layers.*.mlp.gate_proj": ColwiseParallel(), "model.layers.*.mlp.up_proj": ColwiseParallel(),
                 "model.layers.*.self_attn.o_proj": RowwiseParallel(),
                 "model.layers.*.mlp.down_proj": RowwiseParallel()})
    parallelize_module(model, mesh, plan)
    assert isinstance(model.model.layers[1].mlp.down_proj.weight, DTensor)
    ids = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        got, want = model(ids).logits, ref(ids).logits
    assert ((got - want).abs() <= bound(want, 256)).all(), (got - want).abs().max()


def case_lora(rank, world, grade):
    """PEFT LoRA adapters on the packed MLP, sharded with their layers: a column-wise layer's
    lora_B column-wise (its output is the layer's local columns), a row-wise layer's lora_A
    row-wise (it reads the local in_features). One training step's adapter gradients equal
    one process's within the all-reduce bound."""
    from peft import LoraConfig, get_peft_model

    m = mlp(grade, world)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["0", "2"], lora_dropout=0.0,
                        init_lora_weights=False)
    torch.manual_seed(2)
    model = get_peft_model(m, config)
    ref = copy.deepcopy(model)
    mesh = init_device_mesh("cpu", (world,))
    base = "base_model.model."
    parallelize_module(model, mesh, {base + "0.base_layer": ColwiseParallel(),
                                     base + "0.lora_B.default": ColwiseParallel(),
                                     base + "2.base_layer": RowwiseParallel(),
                                     base + "2.lora_A.default": RowwiseParallel()})
    x = torch.randn(4, 256)
    dist.broadcast(x, 0)
    gy = torch.randn(4, 128)
    dist.broadcast(gy, 0)
    model(x).backward(gy)
    ref(x).backward(gy)
    got = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    want = {n: p.grad for n, p in ref.named_parameters() if p.requires_grad}
    assert sorted(got) == sorted(want) and len(got) == 4, sorted(got)
    for name, g in got.items():
        g = g.full_tensor() if isinstance(g, DTensor) else g
        w = want[name]
        assert ((g - w).abs() <= bound(w, 256)).all(), (name, (g - w).abs().max())


def case_die(rank, world, grade, ordered="0"):
    """The last rank exits between the sharding and the forward; the others must fail (the
    row-wise layer's all-reduce, or with ordered="1" the ordered reduction's sends, receives and
    broadcast) with an error within FAULT_TIMEOUT, never hang. Each rank prints what it saw; the
    parent checks the survivors' exit and time."""
    from torch_grit.parallel import OrderedRowwiseParallel

    m = mlp(grade, world)
    mesh = init_device_mesh("cpu", (world,))
    row = OrderedRowwiseParallel() if ordered == "1" else RowwiseParallel()
    parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": row})
    dist.barrier()
    if rank == world - 1:
        os._exit(3)  # killed: no teardown, no goodbye
    try:
        m(torch.randn(2, 256))
        dist.barrier()
    except Exception as e:  # what a user's script would see
        print("rank %d failed: %s: %s" % (rank, type(e).__name__, str(e).splitlines()[0][:300]), flush=True)
        os._exit(2)
    print("rank %d: no error" % rank, flush=True)
    os._exit(0)


def case_load(rank, world, path, hidden, inner, measure):
    """torch_grit.load(path, model=tp_model) into a meta skeleton parallelized by torch: each
    rank's weights are its shards, read from the file alone, and its peak memory grows by
    less than 0.75x the file's packed bytes; the outputs are the whole model's."""
    hidden, inner = int(hidden), int(inner)
    with torch.device("meta"):
        m = nn.Sequential(nn.Linear(hidden, inner), nn.ReLU(), nn.Linear(inner, hidden))
    mesh = init_device_mesh("cpu", (world,))
    parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()}, src_data_rank=None)
    file_bytes = os.path.getsize(path)  # the packed planes, the float biases and a small header
    dist.barrier()
    measured = measure == "1" and reset_peak()
    before = status_kib("VmRSS")
    torch_grit.load(path, model=m)
    if measure == "1":
        assert measured, "this kernel cannot reset the peak RSS (/proc/self/clear_refs)"
        grew = (status_kib("VmHWM") - before) * 1024
        print("rank %d: peak RSS grew %d bytes for a file of %d" % (rank, grew, file_bytes), flush=True)
        assert grew <= 0.75 * file_bytes, (grew, file_bytes)
    for i, dim in (("0", 0), ("2", 1)):
        layer = m[int(i)]
        assert isinstance(layer, GritLinear) and isinstance(layer.weight, DTensor), layer
        assert layer.weight.placements == (Shard(dim),)
        assert layer.packed_weight.logical_shape[dim] == layer.weight.shape[dim] // world
    whole = nn.Sequential(nn.Linear(hidden, inner), nn.ReLU(), nn.Linear(inner, hidden))
    torch_grit.load(path, model=whole)
    for i, dim in (("0", 0), ("2", 1)):
        want = whole[int(i)].weight.dequantize().chunk(world, dim=dim)[rank]
        assert torch.equal(m[int(i)].packed_weight.dequantize(), want)
    x = torch.randn(3, hidden)
    dist.broadcast(x, 0)
    y, y_ref = m(x), whole(x)
    assert ((y - y_ref).abs() <= bound(y_ref)).all(), (y - y_ref).abs().max()


def case_disagree(rank, world, path_a, path_b):
    """The last rank loads another file, or one it cannot open: every rank fails at load (at
    once, not at the collectives' timeout), naming the tensor or the rank, and no model changes."""
    path = path_b if rank == world - 1 else path_a
    with torch.device("meta"):
        m = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256))
    parallelize_module(m, init_device_mesh("cpu", (world,)), {"0": ColwiseParallel(), "2": RowwiseParallel()},
                       src_data_rank=None)
    unopened = not os.path.exists(path_b)
    try:
        torch_grit.load(path, model=m)
    except torch_grit.CheckpointError as e:
        if unopened and rank == world - 1:
            assert "no such file" in str(e), str(e)
        elif unopened:
            assert "rank %d (of this group) could not open" % (world - 1) in str(e) and path_b in str(e), str(e)
        else:
            assert "different checkpoints" in str(e) and "0.weight" in str(e), str(e)
    else:
        raise AssertionError("the load did not fail")
    assert not isinstance(m[0], GritLinear) and m[0].weight.to_local().device.type == "meta"


def case_uneven(rank, world, path):
    """101 output rows over the ranks: torch.chunk's uneven shards (51 + 50 on 2 ranks), from
    parallelize_module on a packed model (src_data_rank=None) and from a sharded load, equal the
    whole weight's chunk and give its output columns bit for bit."""
    whole = nn.Sequential(nn.Linear(256, 101))
    torch_grit.load(path, model=whole)
    from_memory = copy.deepcopy(whole)
    mesh = init_device_mesh("cpu", (world,))
    parallelize_module(from_memory, mesh, {"0": ColwiseParallel()}, src_data_rank=None)
    with torch.device("meta"):
        loaded = nn.Sequential(nn.Linear(256, 101))
    parallelize_module(loaded, mesh, {"0": ColwiseParallel()}, src_data_rank=None)
    torch_grit.load(path, model=loaded)
    x = torch.randn(3, 256)
    dist.broadcast(x, 0)
    want_w = whole[0].weight.dequantize().chunk(world, dim=0)[rank]
    want_y = whole(x).chunk(world, dim=-1)[rank]
    for m in (from_memory, loaded):
        assert torch.equal(m[0].packed_weight.dequantize(), want_w)
        assert torch.equal(m(x), want_y)


def case_hf(rank, world, folder, measure="0", expect_refusal="", plan=""):
    """from_pretrained(folder, distributed_config=DistributedConfig(tp_size=world)) on a GRIT
    folder: transformers' own plan, torch_grit's twins of its styles. Every packed layer holds
    its shard (the cut of the whole weight), read by positioned reads of its spans alone
    (transformers never converts a packed weight); the logits and the gradient to the
    embeddings equal one process's within the all-reduce bound. With measure, each rank's peak
    RSS grows by at most 0.75x the folder's packed bytes."""
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig
    from transformers.utils import logging as hf_logging

    import torch_grit.parallel.load as pload
    from torch_grit.integrations.hf import quantizer

    hf_logging.set_verbosity_error()
    read = []
    real_read = pload._read_spans

    def counted(path, data_start, entry, span):
        out = real_read(path, data_start, entry, span)
        read.append(out.numel())
        return out

    def never(self, *a, **k):
        raise AssertionError("transformers converted the packed weight %s under tensor parallelism" % self.name)
    pload._read_spans = counted
    real_convert = quantizer.GritDeserialize.convert
    quantizer.GritDeserialize.convert = never
    config = DistributedConfig(tp_size=world, **({"tp_plan": json.loads(plan)} if plan else {}))
    if expect_refusal:
        kwargs = {}
        if measure == "quantize":  # a float folder, quantized while loading
            from torch_grit.integrations.hf import GritConfig
            kwargs["quantization_config"] = GritConfig(grade="MXFP4")
        try:
            AutoModelForCausalLM.from_pretrained(folder, distributed_config=config, **kwargs)
        except ValueError as e:
            assert expect_refusal in str(e), str(e)
            assert not read, "bytes were read before the refusal"
            print("refused: %s" % e, flush=True)
            return
        raise AssertionError("the plan was not refused")
    # transformers imports the model's code on its first build: do that outside the measure
    from transformers import AutoConfig
    with torch.device("meta"):
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    dist.barrier()
    measured = measure == "1" and reset_peak()
    before = status_kib("VmRSS")
    model = AutoModelForCausalLM.from_pretrained(folder, distributed_config=config)
    grew = (status_kib("VmHWM") - before) * 1024
    pload._read_spans = real_read
    quantizer.GritDeserialize.convert = real_convert
    packed = {n: m for n, m in model.named_modules() if isinstance(m, GritLinear)}
    assert len(packed) == 15, sorted(packed)  # 7 per layer and the head
    mine = 0
    for n, m in packed.items():
        w = m.weight
        assert isinstance(w, DTensor) and len(w.placements) == 1, (n, w)
        dim = w.placements[0].dim
        local = w.to_local()
        assert isinstance(local, torch_grit.GritTensor), (n, type(local))
        want_dim = 1 if n.endswith(("o_proj", "down_proj")) else 0
        assert dim == want_dim, (n, w.placements)
        mine += sum(p.numel() for p in local.stored_planes if p is not None)
    assert sum(read) == mine, (sum(read), mine)
    packed_file = sum(v for k, v in _plane_bytes(folder).items())
    assert mine < packed_file, (mine, packed_file)
    if measure == "1":
        assert measured, "this kernel cannot reset the peak RSS (/proc/self/clear_refs)"
        print("rank %d: peak RSS grew %d bytes; the folder's packed planes %d, this rank's %d"
              % (rank, grew, packed_file, mine), flush=True)
        assert grew <= 0.75 * packed_file, (grew, packed_file)
    ref = AutoModelForCausalLM.from_pretrained(folder)
    for n, m in packed.items():
        w = m.weight
        cut = ref.get_submodule(n).weight.dequantize().chunk(world, dim=w.placements[0].dim)[rank]
        assert torch.equal(w.to_local().dequantize(), cut), n
    ids = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        got, want = model(ids).logits, ref(ids).logits
    assert ((got - want).abs() <= bound(want, 256)).all(), (got - want).abs().max()
    for mm in (model, ref):
        mm.model.embed_tokens.weight.requires_grad_(True)
        mm(ids).logits.square().mean().backward()
    g, gw = model.model.embed_tokens.weight.grad, ref.model.embed_tokens.weight.grad
    g = g.full_tensor() if isinstance(g, DTensor) else g
    assert ((g - gw).abs() <= bound(gw, 1024)).all(), (g - gw).abs().max()
    # save_pretrained on every rank gathers the whole weights; the main process writes a folder
    # whose packed weights are the original's, byte for byte
    out = os.path.join(os.path.dirname(folder), "saved_from_%d_ranks" % world)
    model.save_pretrained(out, is_main_process=rank == 0)
    dist.barrier()
    again = AutoModelForCausalLM.from_pretrained(out)
    for n in packed:
        a, b = again.get_submodule(n).weight, ref.get_submodule(n).weight
        assert all(torch.equal(x, y) for x, y in zip(a.stored_planes, b.stored_planes) if x is not None), n


def _plane_bytes(folder):
    """{plane name: bytes} of every packed tensor's planes in the folder's files."""
    from torch_grit.checkpoint.read import open_layout
    lay = open_layout(folder)
    out = {}
    for name, (_, packed) in lay.packed.items():
        for e in packed.plane_entries:
            if e is not None:
                out[e.name] = e.end - e.begin
    return out


def bits(t):
    """A float tensor's bit patterns (NaN payloads compared, not NaN != NaN)."""
    return t.view({torch.float32: torch.int32, torch.bfloat16: torch.int16}[t.dtype])


def case_ordered(rank, world, grades):
    """OrderedRowwiseParallel: a lone row-wise layer's output, its gradients to x and to the
    bias, and a column-wise + ordered row-wise MLP's output equal the single-process layer's
    bit for bit, float32 and bfloat16 activations, an infinite and a NaN input included."""
    from torch_grit.parallel import OrderedRowwiseParallel

    mesh = init_device_mesh("cpu", (world,))
    for grade in grades.split(","):
        torch.manual_seed(0)
        k = 256 * world  # each shard a whole Q4KS super-block
        lin = GritLinear.from_linear(nn.Linear(k, 72), grade, name="lin.weight")
        sharded = parallelize_module(copy.deepcopy(lin), mesh, OrderedRowwiseParallel())
        replicated_in = parallelize_module(copy.deepcopy(lin), mesh,
                                           OrderedRowwiseParallel(input_layouts=Replicate()))
        assert "tensor-parallel" in repr(sharded) and "ordered reduction" in repr(sharded)
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(2, 9, k).to(dtype)
            x[0, 1, 3] = float("inf")
            x[1, 4, k - 1] = float("nan")
            dist.broadcast(x, 0)
            gy = torch.randn(2, 9, 72).to(dtype)
            dist.broadcast(gy, 0)
            xr = x.clone().requires_grad_(True)
            y_ref = lin(xr)
            y_ref.backward(gy)
            xs = x.chunk(world, dim=-1)[rank].clone().requires_grad_(True)
            y = sharded(xs)
            assert y.dtype == dtype and y.shape == y_ref.shape
            assert torch.equal(bits(y), bits(y_ref)), (grade, dtype, (y - y_ref).abs().nan_to_num().max())
            sharded.bias.grad = None
            y.backward(gy)
            want_gx = xr.grad.chunk(world, dim=-1)[rank]
            assert torch.equal(bits(xs.grad), bits(want_gx)), (grade, dtype, "grad x")
            gb = sharded.bias.grad
            gb = gb.to_local() if isinstance(gb, DTensor) else gb
            assert torch.equal(bits(gb), bits(lin.bias.grad)), (grade, dtype, "grad bias")
            lin.bias.grad = None
            with torch.no_grad():
                assert torch.equal(bits(replicated_in(x)), bits(y_ref.detach()))
        # A column-wise layer feeding an ordered row-wise one: the MLP's output bit for bit.
        m = mlp(grade, world)
        ref = copy.deepcopy(m)
        parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": OrderedRowwiseParallel()})
        x = torch.randn(5, 256)
        dist.broadcast(x, 0)
        with torch.no_grad():
            assert torch.equal(m(x), ref(x)), (grade, "mlp")
        # The same plan on a meta skeleton filled shard by shard by torch_grit.load.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.safetensors")
            torch_grit.save(ref, path)
            with torch.device("meta"):
                skeleton = nn.Sequential(nn.Linear(256, 256 * world), nn.ReLU(), nn.Linear(256 * world, 128))
            parallelize_module(skeleton, mesh, {"0": ColwiseParallel(), "2": OrderedRowwiseParallel()},
                               src_data_rank=None)
            torch_grit.load(path, model=skeleton)
        with torch.no_grad():
            assert torch.equal(skeleton(x), ref(x)), (grade, "loaded mlp")


CASES = {"full": case_full, "ordered": case_ordered, "mlp_cuda": case_mlp_cuda, "disagree": case_disagree, "uneven": case_uneven, "load": case_load, "die": case_die, "mlp": case_mlp, "refuse": case_refuse, "linear": case_linear_dtypes, "llama": case_llama,
         "lora": case_lora, "hf": case_hf}


def main(argv):
    case, rank, world, init_file = argv[0], int(argv[1]), int(argv[2]), argv[3]
    torch.set_num_threads(1)
    backend = "gloo"
    if case.endswith("_cuda"):
        backend = "nccl"
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=FAULT_TIMEOUT if case in ("die", "disagree") else TIMEOUT,
                            init_method="file://%s" % init_file)
    CASES[case](rank, world, *argv[4:])
    # Every rank has its verdict once the barrier passes. The process then leaves without
    # running gloo's teardown: with a peer that closed its side first, destroy_process_group or
    # the C++ destructors at exit can abort ("terminate called without an active exception",
    # SIGABRT) after a case that passed, on a loaded machine now and then.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
