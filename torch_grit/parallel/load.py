"""``torch_grit.load(path, model=tp_model)`` for a model that
``parallelize_module`` has already sharded: each rank reads from the
safetensors file only its own shards' bytes.

The model may be a skeleton on the meta device. Build it from a config under
``torch.device("meta")``, call ``parallelize_module``, then load. Every
``nn.Linear`` whose weight the file holds packed then becomes a
``GritLinear``. If its weight is a DTensor (``Shard(0)`` column-wise,
``Shard(1)`` row-wise, on a 1-D mesh), the rank reads only the byte ranges
of its shard of each plane: one range for a block of rows, one per row for a
block of whole groups of columns (``tensor/shard.py``'s spans). Shards follow
torch's own sizes (``torch.chunk``: the last ones may be smaller). The rank
reads them with plain positioned reads, not a memory map, so the other
ranks' bytes are never paged in. The layer stays the same module object, so
the forward hooks the plan registered on it keep working. The float tensors
(embeddings, norms, biases) are read whole and distributed with the same
placements as the model's parameters (``src_data_rank=None``: every rank
cuts its own). Everything lands on the mesh's device; tied parameters stay
tied.

Checks, all before the model is touched: every rank opened the same file
(a rank that cannot open it makes every rank fail at once, naming it); each
packed tensor's descriptor passes level 1 against the file's header
(``checkpoint.read.open_layout``); each shard's plane lengths pass level 1
against the shard's own descriptor; every float tensor's shape is the
model's; nothing would be left on the meta device. A placement other than
Shard(0) / Shard(1) / Replicate, an empty shard, or a cut that would split a
group is refused, naming the tensor. No rank ever holds the whole packed or
float weight of a sharded layer.
"""

import os
from collections import OrderedDict

import torch
from torch import nn

from ..checkpoint.format import DTYPES_BY_NAME
from ..checkpoint.read import activation_modes, open_layout
from ..checkpoint.safetensors_io import CheckpointError
from ..contract.descriptor import Descriptor
from ..nn.linear import GritLinear
from ..tensor.grit_tensor import GritTensor
from ..tensor.shard import block_spans

try:
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
except ImportError:  # a torch without torch.distributed: no model is ever sharded
    DTensor = None


def is_sharded(model):
    """Whether any parameter of ``model`` is a DTensor (``parallelize_module`` ran on it)."""
    return DTensor is not None and isinstance(model, nn.Module) and any(
        isinstance(p, DTensor) for p in model.parameters())


def _shard_of(name, dt, shape):
    """(dim, start, end) of this rank's block of a ``shape`` tensor placed like DTensor ``dt``
    (torch's own cut: ``torch.chunk``'s sizes); dim None for a replicated one."""
    mesh, placements = dt.device_mesh, dt.placements
    if mesh.ndim != 1 or len(placements) != 1:
        raise CheckpointError("a %d-D device mesh; the sharded load reads 1-D meshes" % mesh.ndim, tensor=name,
                              field="placement")
    return shard_range(name, mesh, placements[0], shape)


def shard_range(name, mesh, p, shape):
    """(dim, start, end) of this rank's block of a ``shape`` tensor under placement ``p`` on the
    1-D ``mesh`` (torch's own cut: ``torch.chunk``'s sizes); dim None for Replicate."""
    if isinstance(p, Replicate):
        return None, 0, 0
    if not isinstance(p, Shard) or p.dim % 2 not in (0, 1):
        raise CheckpointError("placement %s; the sharded load reads Shard(0), Shard(1) and Replicate"
                              % (p,), tensor=name, field="placement")
    dim, world, rank = p.dim % 2, mesh.size(), mesh.get_local_rank()
    size, start = Shard.local_shard_size_and_offset(shape[dim], world, rank)
    if size == 0:
        raise CheckpointError("dimension %d (%d) over %d ranks leaves rank %d an empty shard, which has no "
                              "packed form; use fewer ranks" % (dim, shape[dim], world, rank), tensor=name,
                              field="shape", expected="at least %d" % world, found=shape[dim])
    return dim, start, start + size


def _read_spans(path, data_start, entry, span):
    """The bytes of one span of one plane entry, by positioned reads (a read that returns
    less than asked is continued; only a read of nothing means the file ended)."""
    first, width, count, stride = span
    out = torch.empty(width * count, dtype=torch.uint8)
    if width * count == 0:
        return out
    view = memoryview(out.numpy())
    base = data_start + entry.begin + first
    fd = os.open(path, os.O_RDONLY)
    try:
        for k in range(count):
            done = 0
            while done < width:
                got = os.preadv(fd, [view[k * width + done:(k + 1) * width]], base + k * stride + done)
                if got <= 0:
                    raise CheckpointError("the file ends inside plane %s" % entry.name, path, entry.name,
                                          field="data_offsets", expected=width, found=done)
                done += got
    finally:
        os.close(fd)
    return out


def _packed_shard(name, header, packed, dt):
    """This rank's shard of one packed tensor (a GritTensor), read from its spans, checked."""
    shape = tuple(packed.descriptor.shape)
    dim, start, end = _shard_of(name, dt, shape) if dt is not None else (None, 0, 0)
    return read_packed_block(name, header, packed, dim, start, end,
                             dt.device_mesh.size() if dt is not None else 1)


def read_packed_block(name, header, packed, dim, start, end, pieces):
    """Rows (dim 0) or columns (dim 1) start..end of one packed tensor of the file, read from
    their spans alone into a checked GritTensor (dim None: the whole tensor); ``pieces``
    is the number of shards the tensor is cut into."""
    shape = tuple(packed.descriptor.shape)
    grade = packed.descriptor.grade
    if dim is None:
        start, end, dim = 0, shape[0], 0
    spans = block_spans(grade, shape, dim, start, end, label="GritTensor %r" % name, pieces=pieces)
    planes = [_read_spans(header.path, header.data_start, e, sp) if e is not None else None
              for e, sp in zip(packed.plane_entries, spans)]
    local = (end - start, shape[1]) if dim == 0 else (shape[0], end - start)
    placement = tuple(Descriptor(grade, local).placement)
    return GritTensor.from_planes(planes, grade, local, DTYPES_BY_NAME[packed.dtype], placement=placement,
                                  name=name)


def load_sharded(path, model, *, verify="structure", strict=True, activations="recorded"):
    """Fill a ``parallelize_module``-d model from a torch_grit checkpoint, each rank reading
    its own shards only (see the module docstring). Returns the model."""
    if verify == "digest":
        raise ValueError("verify='digest' reads every plane whole to hash it; a sharded load reads only this "
                         "rank's bytes. Verify the file once with torch-grit inspect --verify digest (or "
                         "torch_grit.load(path, verify='digest') on one process), then load sharded")
    lay = _open_on_every_rank(path, model)  # every descriptor at level 1, from the headers alone
    _check_activations(lay, activations)
    _check_no_input_perm(lay)
    shards, floats, groups = _read_and_check(model, lay, strict)
    # Everything read and checked: now the model changes.
    _install(model, shards, floats, groups, _mesh_device(model))
    _set_activations(model)
    return model


def _read_and_check(model, lay, strict):
    """Every shard and float tensor this rank takes, read and checked against the model.
    Returns (shards, floats, groups): name -> (module, DTensor or None, local GritTensor),
    name -> tensor, and each parameter's alias names (tied parameters)."""
    from safetensors import safe_open

    groups = {}  # id(parameter) -> every name it goes by (tied weights share one)
    params = OrderedDict()
    for n, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(n)
        params[n] = p
    buffers = OrderedDict(model.named_buffers(remove_duplicate=False))
    shards, floats = OrderedDict(), OrderedDict()
    for name, (header, packed) in sorted(lay.packed.items()):
        owner, _, leaf = name.rpartition(".")
        module = _submodule(model, owner)
        if leaf != "weight" or not isinstance(module, nn.Linear):
            raise CheckpointError("the file holds %s packed, but the model has no nn.Linear %r to take it"
                                  % (name, owner), tensor=name, field="model")
        want = (module.out_features, module.in_features)
        if tuple(packed.descriptor.shape) != want:
            raise CheckpointError("packed weight of shape %s does not fit (out, in) = %s"
                                  % (tuple(packed.descriptor.shape), want), tensor=name, field="shape",
                                  expected=want, found=tuple(packed.descriptor.shape))
        tied = [n for n in groups.get(id(module.weight), [name]) if n != name]
        if tied:
            raise CheckpointError("the model ties %s to %s; a packed weight cannot be shared with another "
                                  "module. Untie them before parallelize_module" % (name, tied), tensor=name,
                                  field="model")
        w = module.weight
        dt = w if isinstance(w, DTensor) else None
        shards[name] = (module, dt, _packed_shard(name, header, packed, dt))
    for name, (header, entry) in sorted(lay.plain.items()):
        current = params.get(name, buffers.get(name))
        if current is None:
            if strict:
                raise CheckpointError("the file holds %s, which the model does not have (pass strict=False "
                                      "to load what matches)" % name, tensor=name, field="keys")
            continue
        owner, _, leaf = name.rpartition(".")
        if leaf == "weight" and getattr(_submodule(model, owner), "grit_row_reduction", None) == "ordered":
            raise CheckpointError("%r was parallelized with OrderedRowwiseParallel, which continues packed "
                                  "sums, but the file holds its weight as float; plan it with RowwiseParallel"
                                  % owner, tensor=name, field="model")
        with safe_open(header.path, framework="pt", device="cpu") as f:
            value = f.get_tensor(name)
        if tuple(value.shape) != tuple(current.shape):
            raise CheckpointError("shape %s in the file, %s in the model" % (tuple(value.shape),
                                                                            tuple(current.shape)),
                                  tensor=name, field="shape", expected=tuple(current.shape),
                                  found=tuple(value.shape))
        floats[name] = value
    _check_ties(params, groups, floats)
    covered = {id(params[n]) for n in list(floats) + list(shards) if n in params}
    missing = sorted(n for n, p in params.items() if id(p) not in covered)
    if strict and missing:
        raise CheckpointError("the model has %s, which the file does not hold" % missing[:8], field="keys")
    still_meta = [n for n in missing if _is_meta(params[n])]
    still_meta += [n for n, b in buffers.items() if n not in floats and _is_meta(b)]
    if still_meta:
        raise CheckpointError("would stay on the meta device after the load: %s. A file holds no "
                              "non-persistent buffer (a rotary embedding's inv_freq): build those modules on "
                              "a real device before parallelize_module, or recreate them and load with "
                              "strict=False" % still_meta[:8], field="keys")
    return shards, floats, groups


def _check_ties(params, groups, floats):
    """A file that holds two names of one tied parameter must hold the same values under both."""
    for names in groups.values():
        held = [n for n in names if n in floats]
        for other in held[1:]:
            if not torch.equal(floats[held[0]], floats[other]):
                raise CheckpointError("the model ties %s and %s, but the file holds different values for "
                                      "them" % (held[0], other), tensor=other, field="keys")


def _install(model, shards, floats, groups, device):
    """The swaps, after every check passed."""
    for name, (module, dt, local) in shards.items():
        local = local.to(device) if local.device != device else local
        if dt is not None:
            weight = DTensor.from_local(local, dt.device_mesh, dt.placements, run_check=False,
                                        shape=tuple(dt.shape), stride=(module.in_features, 1))
        else:
            weight = local
        if not isinstance(module, GritLinear):
            # The same module object, now a GritLinear: the forward hooks parallelize_module put on
            # it stay (a new module would drop them). GritLinear adds methods, and no state but
            # an empty input permutation (a sharded load refuses files that hold one).
            module.__class__ = GritLinear
            module.activations = None
            module.register_buffer("input_perm", None)
        module.weight = nn.Parameter(weight, requires_grad=False)
    params = dict(model.named_parameters(remove_duplicate=False))
    buffers = dict(model.named_buffers(remove_duplicate=False))
    done = set()
    for name, value in floats.items():
        current = params.get(name)
        if current is None:
            _set(model, name, value.to(device=device, dtype=buffers[name].dtype), buffer=True)
            continue
        if id(current) in done:  # the same tied parameter, already placed under another name
            continue
        done.add(id(current))
        value = value.to(current.dtype)
        if isinstance(current, DTensor):
            value = distribute_tensor(value, current.device_mesh, current.placements, src_data_rank=None)
        else:
            value = value.to(device)
        new = nn.Parameter(value, requires_grad=current.requires_grad)
        for alias in groups[id(current)]:
            _set(model, alias, new)


def _set(model, name, value, buffer=False):
    owner, _, leaf = name.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    if buffer:
        module._buffers[leaf] = value
    else:
        setattr(module, leaf, value)


def _mesh_device(model):
    """Where the shards go: the device of the model's device mesh (the current CUDA device on a
    CUDA mesh), so that tensors outside the plan land beside the sharded ones."""
    mesh = next(p.device_mesh for p in model.parameters() if isinstance(p, DTensor))
    kind = mesh.device_type
    if kind == "cpu":
        return torch.device("cpu")
    return torch.device(kind, torch.get_device_module(kind).current_device())


def _open_on_every_rank(path, model):
    """open_layout on every rank, then the ranks agree (``open_agreed``) over each mesh the
    model's DTensors use."""
    meshes = {}
    for p in model.parameters():
        if isinstance(p, DTensor):
            meshes.setdefault(id(p.device_mesh), p.device_mesh)
    return open_agreed(path, meshes.values())


def open_agreed(path, meshes):
    """open_layout on every rank, then the ranks agree: each rank of each mesh
    opened a file, and the same checkpoint (the same packed tensors with the same gid and
    digest, from the headers). A rank that could not open its file, or read another one,
    makes every rank fail at once, naming it or the first tensor that differs, before any
    tensor's bytes are read."""
    import torch.distributed as dist

    try:
        lay, failure = open_layout(path), None
        mine = sorted((name, packed.descriptor.gid, packed.digest) for name, (_, packed) in lay.packed.items())
    except Exception as e:  # noqa: BLE001 (re-raised below, after every rank has heard of it)
        lay, failure = None, e
        mine = ("failed", "%s: %s" % (type(e).__name__, e))
    for mesh in meshes:
        group = mesh.get_group()
        every = [None] * dist.get_world_size(group)
        dist.all_gather_object(every, mine, group=group)
        if failure is not None:
            raise failure
        for rank, theirs in enumerate(every):
            if theirs == mine:
                continue
            if isinstance(theirs, tuple) and theirs[:1] == ("failed",):
                raise CheckpointError("rank %d (of this group) could not open its checkpoint: %s"
                                      % (rank, theirs[1]), path, field="file")
            a, b = dict((n, (g, d)) for n, g, d in mine), dict((n, (g, d)) for n, g, d in theirs)
            name = next((n for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)), None)
            raise CheckpointError("the ranks read different checkpoints: rank %d (of this group) has %s for "
                                  "%s, this rank %s" % (rank, _gid_text(b.get(name)), name, _gid_text(a.get(name))),
                                  tensor=name, field="gid", expected=_gid_text(a.get(name)),
                                  found=_gid_text(b.get(name)))
    if failure is not None:
        raise failure
    return lay


def _gid_text(entry):
    return "no such packed tensor" if entry is None else "gid %s digest %s" % entry


def _submodule(model, owner):
    try:
        return model.get_submodule(owner) if owner else model
    except AttributeError:
        return None


def _is_meta(p):
    t = p.to_local() if DTensor is not None and isinstance(p, DTensor) else p
    return t.device.type == "meta"


def _check_activations(lay, activations):
    recorded = activation_modes(lay)
    modes = set(recorded.values()) if activations == "recorded" else {activations}
    modes.discard(None)
    if modes:
        raise ValueError("activations=%r runs on a whole packed weight; a sharded load gives each rank a "
                         "shard. Load with activations=None" % sorted(modes)[0])


def _check_no_input_perm(lay):
    """A layer with an input permutation (GPTQ act-order) is not sharded: refused by name."""
    for name in sorted(lay.plain):
        owner = name[:-len(".input_perm")] if name.endswith(".input_perm") else None
        if owner is not None and owner + ".weight" in lay.packed:
            raise ValueError("%s: this layer permutes its inputs before its packed weight (GPTQ act-order), "
                             "and tensor parallelism does not take such layers (its groups of columns are "
                             "groups of permuted inputs). Load the checkpoint whole, without parallelize_module"
                             % name)


def _set_activations(model):
    """Float activations on every packed layer (the only mode a shard runs)."""
    for m in model.modules():
        if isinstance(m, GritLinear):
            m.activations = None
