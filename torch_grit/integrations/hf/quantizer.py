"""``GritHfQuantizer``: transformers' from_pretrained builds GRIT packed models.

A folder whose config.json says ``"quant_method": "grit"`` (pre-quantized):
before any weight is read, every header, index and descriptor of its files is
checked (torch_grit's reader, level 1), and each ``nn.Linear`` the files hold
packed is replaced by a ``GritLinear`` around meta planes of the right sizes,
so no float weight is ever allocated for it. transformers' loader then reads
the planes (and the zero-byte load guard under the weight's own name) through
one converter per packed weight, which wraps them as a checked GritTensor. A
layer whose folder holds ``<layer>.input_perm`` (GPTQ act-order) gets that
buffer before the weights load (checked first: int64, a permutation of the
layer's inputs), and transformers fills it like any buffer.
With ``verify="digest"`` every plane's digest is checked after loading, before
the model is returned. Under transformers' tensor parallelism
(``distributed_config=DistributedConfig(tp_size=N)``) the plan's rules for
packed layers go to torch_grit's twins of transformers' styles, and each rank
reads only its shards' bytes (``tensor_parallel.py``). A float model with ``quantization_config=GritConfig(...)``
is loaded as usual and then packed by ``torch_grit.quantize_``: the same bits
as quantizing the float model by hand.
"""

import os
import types

import torch
from torch import nn
from transformers.core_model_loading import ConversionOps, WeightConverter
from transformers.quantizers.base import HfQuantizer

from ...checkpoint.format import DTYPES_BY_NAME, PLANE_SUFFIXES
from ...checkpoint.read import activation_modes, open_layout
from ...checkpoint.safetensors_io import CheckpointError
from ...checkpoint.save_load import read_input_perms
from ...contract.check import check
from ...contract.errors import GritCheckError
from ...nn.linear import GritLinear
from ...contract.grade import resolve_grade
from ...quantization.quantize_model import handler_for, quantize_
from ...tensor.grit_tensor import GritTensor

try:
    from torch.distributed.tensor import DTensor
except ImportError:  # a torch without torch.distributed
    DTensor = None
from .config import VERSION, version_tuple
from . import folder
from . import tensor_parallel as tp


def _checkpoint_path(files):
    """What torch_grit's reader opens: the one file, or the folder holding shards and their index."""
    files = [os.fspath(f) for f in files or []]
    if not files:
        raise CheckpointError("a GRIT model folder has safetensors weights; transformers found none")
    bad = [f for f in files if not f.endswith(".safetensors")]
    if bad:
        raise CheckpointError("GRIT weights are safetensors files; found %s" % bad[0], bad[0])
    return files[0] if len(files) == 1 else os.path.dirname(files[0])


def _model_name(model, name, params):
    """The model's name for a checkpoint tensor (the base model prefix added or removed)."""
    prefix = getattr(model, "base_model_prefix", "") or ""
    for cand in (name, prefix + "." + name if prefix else None,
                 name[len(prefix) + 1:] if prefix and name.startswith(prefix + ".") else None):
        if cand is not None and cand in params:
            return cand
    return None


class GritDeserialize(ConversionOps):
    """One packed weight: its planes (and load guard) as read by transformers -> a GritTensor."""

    def __init__(self, name, packed, sources):
        self.name, self.packed, self.sources = name, packed, sources

    def convert(self, input_dict, model=None, **kwargs):
        u = self.packed
        if model is not None and DTensor is not None and isinstance(model.get_parameter(self.name), DTensor):
            raise CheckpointError(
                "%s is packed, and the tp_plan shards it with a style torch_grit has no twin for (its "
                "placeholder became a DTensor, whose slicing cannot cut packed planes); plan packed layers "
                "with a column-wise or row-wise style (torch_grit runs them as grit_<style>)" % self.name,
                tensor=u.name, field="tp_plan")
        planes = [None] * 4
        for i, suffix in enumerate(PLANE_SUFFIXES):
            got = input_dict.get(self.sources.get(suffix))
            if got is not None:
                planes[i] = (got[0] if isinstance(got, list) else got).contiguous().view(-1)
        missing = [u.name + PLANE_SUFFIXES[i] for i, n in enumerate(u.plane_bytes)
                   if n and planes[i] is None]
        if missing:
            raise CheckpointError("transformers did not read %s" % ", ".join(missing), tensor=u.name)
        w = GritTensor.from_planes(planes, u.grade, u.shape, DTYPES_BY_NAME[u.dtype],
                                   placement=tuple(u.descriptor.placement), name=u.name)
        # The planes stay as transformers read them, uncopied (the load costs about the folder's
        # size: test_peak_memory_stays_near_the_packed_size); torch_grit.tile_(model) tiles after.
        return {self.name: nn.Parameter(w, requires_grad=False)}


class GritHfQuantizer(HfQuantizer):
    """quant_method "grit" for transformers (see the module doc)."""

    requires_calibration = False

    def __init__(self, quantization_config, **kwargs):
        super().__init__(quantization_config, **kwargs)
        self._packed = {}  # model parameter name -> (checkpoint name, Packed)
        self._policy = None  # the folder's grade policy (grades chosen per tensor)
        self._perms = {}  # model module name -> the input permutation the folder holds for it
        self._path = None  # what torch_grit's reader opens (a file, or a folder of shards)
        self._weights = {}  # model module name -> the checkpoint name of its packed weight

    def validate_environment(self, device_map=None, **kwargs):
        if self.pre_quantized:
            wrote = self.quantization_config.torch_grit_version
            if version_tuple(VERSION) < version_tuple(wrote):
                raise ImportError(
                    "this model folder was written by torch_grit %s; the installed torch_grit is %s, "
                    "too old to read it: pip install 'torch_grit>=%s'" % (wrote, VERSION, wrote))
        elif self.quantization_config.grade is None:
            raise ValueError("GritConfig: quantizing a float model while loading needs a grade "
                             "(GritConfig(grade=\"MXFP4\"), or grade=\"auto\")")
        if isinstance(device_map, dict) and "disk" in device_map.values():
            raise ValueError("GRIT packed layers cannot be offloaded to disk; use a device_map "
                             "without \"disk\"")

    def update_dtype(self, dtype):
        return dtype

    def param_needs_quantization(self, model, param_name, **kwargs):
        return False  # packed weights arrive packed; float models are packed after loading

    def _process_model_before_weight_loading(self, model, checkpoint_files=None, **kwargs):
        if not self.pre_quantized:
            tp.refuse_plan(model)
            return model
        # Every header, index and descriptor is checked here, before any weight is read.
        self._path = _checkpoint_path(checkpoint_files)
        lay = open_layout(self._path)
        self._policy = folder.grade_policy_of(lay)
        recorded = activation_modes(lay)  # {checkpoint module name: "s8"}
        perms = read_input_perms(lay)  # {checkpoint module name: int64 permutation}, checked
        params = dict(model.named_parameters())
        swaps = []
        for name in sorted(lay.packed):
            _, u = lay.packed[name]
            target = _model_name(model, name, params)
            owner, _, leaf = (target or "").rpartition(".")
            module = model.get_submodule(owner) if target else None
            if leaf != "weight" or not isinstance(module, nn.Linear) or isinstance(module, GritLinear):
                raise CheckpointError(
                    "the folder holds %s packed, but %s has no nn.Linear there to take it (found %s)"
                    % (name, type(model).__name__, type(module).__name__ if module is not None
                       else "nothing"), tensor=name, field="model")
            if (module.out_features, module.in_features) != tuple(u.shape):
                raise CheckpointError(
                    "%s: packed shape %s, but the model's layer is (out, in) = %s" % (
                        name, tuple(u.shape), (module.out_features, module.in_features)),
                    tensor=name, field="shape", expected=(module.out_features, module.in_features),
                    found=tuple(u.shape))
            meta = [torch.empty(n, dtype=torch.uint8, device="meta") for n in u.plane_bytes]
            placeholder = GritTensor(*meta, u.grade.canonical, tuple(u.descriptor.placement),
                                     tuple(u.shape), DTYPES_BY_NAME[u.dtype])
            layer = GritLinear.from_packed(placeholder, module.bias)
            layer._grit_fqn = owner  # named by a tensor-parallel refusal
            # a grade without an s8 law raises here, naming the layer, before any weight is read
            layer.set_activations_(self._activations_for(name, recorded), name=owner)
            perm = perms.get(name[:-len(".weight")])
            if perm is not None:
                # a meta buffer of the right size: transformers loads <layer>.input_perm into it
                layer.set_input_perm_(perm, name=owner)
                self._perms[owner] = perm
            swaps.append((owner, layer))
            self._packed[target] = (name, u)
            self._weights[owner] = name
        for owner, layer in swaps:
            parent, _, child = owner.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, child, layer)
        # Under tensor parallelism the packed planes are read by load_packed_shards, not by
        # transformers: they are then keys the model does not have, and not worth a warning.
        model._keys_to_ignore_on_load_unexpected = (set(model._keys_to_ignore_on_load_unexpected or ())
                                                    | set(tp.unexpected_patterns(sorted(lay.packed))))
        tp.route_plan(model, self._weights)
        return model

    def _activations_for(self, name, recorded):
        """The mode of the layer whose packed weight the folder holds as ``name``: the
        config's ``activations`` when it says one, else what the folder records."""
        said = self.quantization_config.activations
        if said is not None:
            return said
        module = name[:-len(".weight")] if name.endswith(".weight") else name
        return recorded.get(module)

    def get_weight_conversions(self):
        out = []
        for target, (name, u) in sorted(self._packed.items()):
            sources = {s: name + s for s, n in zip(PLANE_SUFFIXES, u.plane_bytes) if n}
            patterns = ([name] if u.guard else []) + list(sources.values())
            out.append(WeightConverter(patterns, target, [GritDeserialize(target, u, sources)]))
        return out

    def _process_model_after_weight_loading(self, model, **kwargs):
        if self.pre_quantized:
            tp.load_packed_shards(model, self._path, self._weights, self.quantization_config.verify)
            self._check_loaded(model)
            if self._policy is not None:
                model.grit_grade_policy = self._policy  # saved again by save_pretrained
        else:
            self._quantize(model)
        # save_pretrained writes through torch_grit's writer (folder.save_pretrained).
        model.save_pretrained = types.MethodType(folder.bound_save_pretrained, model)
        return model

    def _check_loaded(self, model):
        """Every packed weight arrived as a checked GritTensor; with verify="digest", its digest."""
        level2 = self.quantization_config.verify == "digest"
        for target, (name, u) in sorted(self._packed.items()):
            w = model.get_parameter(target)
            if DTensor is not None and isinstance(w, DTensor):
                w = w.to_local()  # this rank's shard, read and checked by load_packed_shards
                if level2:
                    raise ValueError("verify='digest' hashes every plane whole; %s is a tensor-parallel "
                                     "shard" % name)
            if not isinstance(w, GritTensor) or w.device.type == "meta":
                raise CheckpointError("%s was not loaded from the folder" % name, tensor=name,
                                      field="planes")
            owner = target.rpartition(".")[0]
            if owner in self._perms:
                perm = model.get_submodule(owner).input_perm
                if perm is None or perm.device.type == "meta" or not torch.equal(perm.cpu(), self._perms[owner]):
                    raise CheckpointError("%s.input_perm was not loaded from the folder as it is there" % owner,
                                          tensor=owner + ".input_perm", field="input_perm")
            if level2:
                try:
                    check(u.descriptor, w.planes, level=2, digest=u.digest, tensor=name)
                except GritCheckError as err:
                    raise GritCheckError("%s (loading %s)" % (err, name), err.status, err.field,
                                         expected=err.expected, found=err.found, plane=err.plane,
                                         tensor=name) from None

    def _quantize(self, model):
        cfg = self.quantization_config
        grade, budget_db, candidates = cfg.quantize_args()
        skip = tuple(cfg.modules_to_not_convert)

        def named(fqn):
            return any(fqn == s or fqn.startswith(s + ".") for s in skip)
        filter_fn = None
        if skip:
            fixed = None if cfg.is_auto else resolve_grade(grade)

            def filter_fn(module, fqn):
                # quantize_'s default (pack what fits, keep the rest exact), minus the named modules
                if named(fqn):
                    return False
                return fixed is None or handler_for(module).skip_reason(module, fixed, fqn) is None
        reports = quantize_(model, grade, filter_fn=filter_fn, budget_db=budget_db,
                            candidates=candidates, activations=cfg.activations)
        cfg.modules_to_not_convert = sorted(set(skip) | {r.fqn for r in reports
                                                         if not r.quantized and not named(r.fqn)})

    def is_serializable(self):
        return True

    @property
    def is_trainable(self):
        return True  # adapters over frozen packed weights (PEFT)

    @property
    def is_qat_trainable(self):
        return False


__all__ = ["GritHfQuantizer", "GritDeserialize"]
