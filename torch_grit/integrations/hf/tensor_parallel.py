"""transformers' own tensor parallelism (``from_pretrained(...,
distributed_config=DistributedConfig(tp_size=N))``) over a GRIT model folder,
each rank reading only its shards' bytes.

transformers shards a model on the meta device before it reads a weight: each
rule of the model's plan names a style ("colwise", "rowwise",
"colwise_gather_output", ...) whose ``shard_param`` turns the parameter into a
DTensor, and its loader then slices every checkpoint tensor like that
DTensor. A packed weight is four byte planes, not one [out, in] tensor, so
that slicing cannot cut it. For every column-wise and row-wise style this
module registers a twin, ``grit_<style>``, which behaves the same on float
layers and on a GritLinear differs in two things:

- ``shard_param`` takes the packed weight out of the model until the float
  tensors are loaded (transformers then never reads its planes: they are keys
  the model does not have) and records the mesh and the dimension to cut. A
  cut that would split a group, a layer with an input permutation and a layer
  in the s8 activation mode are refused here, naming the layer, before any
  byte is read.
- the forward runs on the local shard (``_hf_quantized_needs_local_tp``, the
  flag transformers' styles read for quantized layers): the packed kernels
  see a plain GritTensor, and the style's hooks do the collectives.

``GritHfQuantizer`` routes the plan's rules for the packed layers to the
twins (``route_plan``), and after transformers' load calls ``load_packed_shards``: the ranks
agree on the checkpoint (the same packed tensors, gids and digests), then
each reads its shard of each deferred weight with positioned reads of its
spans alone, checked at level 1, and installs it as a DTensor.
"""

import re

import torch
from torch import nn

from ...checkpoint.safetensors_io import CheckpointError
from ...contract.grade import resolve_grade
from ...nn.linear import GritLinear
from ...parallel.load import open_agreed, read_packed_block, shard_range
from ...tensor.shard import block_spans

try:
    from torch.distributed.tensor import DTensor, Shard
    from transformers.distributed.parallel_utils import ALL_PARALLEL_STYLES, replace_layer_number_by_wildcard
    from transformers.distributed.tensor_parallel import ColwiseParallel, RowwiseParallel
except ImportError:  # a torch without torch.distributed or a transformers without its TP styles
    ALL_PARALLEL_STYLES = None

PREFIX = "grit_"
PENDING = "_grit_tp_pending"  # on a GritLinear whose shard is read after transformers' load


def _defer(style, module, param, mesh, dim):
    """Takes a GritLinear's packed weight out of the model (see the module doc); False for
    anything else, which the stock style shards."""
    if not isinstance(module, GritLinear) or param != "weight":
        return False
    name = getattr(module, "_grit_fqn", None) or type(module).__name__
    if getattr(module, "input_perm", None) is not None:
        raise ValueError("%s: this layer permutes its inputs before its packed weight (GPTQ act-order), and "
                         "tensor parallelism does not take such layers; leave it out of the tp_plan" % name)
    if module.activations is not None:
        raise ValueError("%s: activations=%r runs on a whole packed weight, and tensor parallelism gives "
                         "each rank a shard; load with GritConfig(activations=None)" % (name, module.activations))
    if mesh.ndim != 1:
        raise ValueError("%s: a %d-D device mesh; packed layers shard on 1-D tensor-parallel meshes"
                         % (name, mesh.ndim))
    w = module.weight
    shape = tuple(w.logical_shape)
    d, start, end = shard_range(name, mesh, Shard(dim), shape)
    # every rank's cut, so a plan that splits a group fails on every rank alike
    for r in range(mesh.size()):
        size, first = Shard.local_shard_size_and_offset(shape[d], mesh.size(), r)
        block_spans(resolve_grade(w.grade_canonical), shape, d, first, first + size,
                    label="layer %r (%s)" % (name, style), pieces=mesh.size())
    del module._parameters["weight"]
    setattr(module, PENDING, (mesh, d, start, end, shape))
    module._hf_quantized_needs_local_tp = True
    return True


def _twin(base):
    """A subclass of transformers' style class ``base`` that defers packed weights."""
    dim = 0 if issubclass(base, ColwiseParallel) else 1

    class Twin(base):
        def shard_param(self, module, param, mesh):
            if not _defer(self._grit_style, module, param, mesh, dim):
                super().shard_param(module, param, mesh)

        def install_forward(self, module, mesh):
            if isinstance(module, GritLinear):
                module._hf_quantized_needs_local_tp = True
            return super().install_forward(module, mesh)

    Twin.__name__ = Twin.__qualname__ = "Grit" + base.__name__
    return Twin


def register_styles():
    """``grit_<name>`` for every registered column-wise or row-wise style (idempotent).
    Returns {stock name: twin name}."""
    if ALL_PARALLEL_STYLES is None:
        return {}
    twins = {}
    for name in list(ALL_PARALLEL_STYLES.keys()):
        style = ALL_PARALLEL_STYLES[name]
        if name.startswith(PREFIX) or type(style) not in (ColwiseParallel, RowwiseParallel):
            continue
        twin_name = PREFIX + name
        if twin_name not in ALL_PARALLEL_STYLES:
            twin = _twin(type(style)).__new__(_twin(type(style)))
            twin.__dict__.update(style.__dict__)
            twin._grit_style = twin_name
            ALL_PARALLEL_STYLES.register(twin_name, twin)
        twins[name] = twin_name
    return twins


def route_plan(model, packed_modules):
    """Sends the tensor-parallel rules of the packed layers (``packed_modules``: their module
    names) to the ``grit_`` twins of their styles, in the plan transformers resolves for this
    model (the model's own plan merged with ``DistributedConfig(tp_plan=...)``), so a plan
    the user passes is routed too. A packed layer under a style without a twin is refused,
    naming it, before any weight is read."""
    resolve = getattr(model, "_resolve_parallel_plans", None)
    if resolve is None or ALL_PARALLEL_STYLES is None:
        return
    twins = register_styles()
    packed = set(packed_modules)

    def resolved(distributed_config):
        tp_plan, *rest = resolve(distributed_config)
        out = {}
        for key, style in tp_plan.items():
            owner = key.rpartition(".")[0] if key.endswith((".weight", ".bias")) else key
            if owner not in packed:
                out[key] = style
            elif style in twins.values():
                out[key] = style
            elif style in twins:
                out[key] = twins[style]
            else:
                raise ValueError("%s is a packed layer, and the tp_plan gives it the style %r; torch_grit "
                                 "shards packed layers with the column-wise and row-wise styles (%s)"
                                 % (owner, style, ", ".join(sorted(twins))))
        return (out, *rest)

    model._resolve_parallel_plans = resolved


def refuse_plan(model):
    """Quantizing a float folder while loading it under a tensor-parallel plan is refused when
    the plan is resolved, before any weight is read."""
    resolve = getattr(model, "_resolve_parallel_plans", None)
    if resolve is None:
        return

    def resolved(distributed_config):
        plans = resolve(distributed_config)
        if plans[0]:
            raise ValueError("GritConfig(grade=...) quantizes a float folder after it loads, and under a "
                             "tensor-parallel plan each rank would hold float shards; convert the folder "
                             "once with torch-grit quantize SRC DST, then load DST with the plan")
        return plans

    model._resolve_parallel_plans = resolved


def unexpected_patterns(names):
    """transformers' ``_keys_to_ignore_on_load_unexpected`` entries for packed tensors whose planes
    a tensor-parallel load leaves to ``load_packed_shards``."""
    return [r"^(?:.*\.)?%s(?:\..*)?$" % re.escape(n) for n in names]


def pending_layers(model):
    """{module name: GritLinear} of the layers whose shard is still to read."""
    return {n: m for n, m in model.named_modules() if getattr(m, PENDING, None) is not None}


def load_packed_shards(model, path, names, verify):
    """Reads each pending layer's shard (see the module doc). ``names``: {module name: the
    checkpoint's tensor name of its weight}."""
    pending = pending_layers(model)
    if not pending:
        return
    if verify == "digest":
        raise ValueError("verify='digest' hashes every plane whole; a tensor-parallel load reads only this "
                         "rank's bytes. Verify the folder once with torch-grit inspect --verify digest, then "
                         "load it with tensor parallelism")
    meshes = {}
    for m in pending.values():
        mesh = getattr(m, PENDING)[0]
        meshes.setdefault(id(mesh), mesh)
    lay = open_agreed(path, meshes.values())
    locals_ = {}
    for owner, m in sorted(pending.items()):
        name = names.get(owner)
        if name is None or name not in lay.packed:
            raise CheckpointError("%s was planned for tensor parallelism as a packed layer, but the folder "
                                  "holds no packed weight for it" % owner, tensor=owner + ".weight",
                                  field="keys")
        mesh, dim, start, end, shape = getattr(m, PENDING)
        header, packed = lay.packed[name]
        if tuple(packed.descriptor.shape) != shape:
            raise CheckpointError("packed shape %s in the folder, %s in the model"
                                  % (tuple(packed.descriptor.shape), shape), tensor=name, field="shape",
                                  expected=shape, found=tuple(packed.descriptor.shape))
        locals_[owner] = read_packed_block(name, header, packed, dim, start, end, mesh.size())
    # every shard read and checked: now the model changes
    for owner, m in pending.items():
        mesh, dim, _, _, shape = getattr(m, PENDING)
        local = locals_[owner]
        device = torch.device("cpu") if mesh.device_type == "cpu" else torch.device(
            mesh.device_type, torch.get_device_module(mesh.device_type).current_device())
        local = local.to(device) if local.device != device else local
        w = DTensor.from_local(local, mesh, [Shard(dim)], run_check=False, shape=shape, stride=(shape[1], 1))
        m._parameters["weight"] = nn.Parameter(w, requires_grad=False)
        delattr(m, PENDING)


__all__ = ["register_styles", "route_plan", "refuse_plan", "unexpected_patterns", "pending_layers", "load_packed_shards",
           "PREFIX"]
