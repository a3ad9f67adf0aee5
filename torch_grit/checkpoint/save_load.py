"""Checked checkpoints: GRIT tensors in plain safetensors files.

Layout of one packed tensor ``W`` (logical name, e.g. ``layer.0.fc.weight``):

- its planes are ordinary ``U8`` entries ``W.grit.data``, ``W.grit.scale0``,
  ``W.grit.scale1``, ``W.grit.aux`` (a plane whose required length is zero is
  not written);
- its 64-byte descriptor, as 128 hex digits, is ``__metadata__["__grit__"]``
  (a JSON string) under the key ``W``: the map and the encoding grit-scan reads;
- what torch_grit needs besides the descriptor (the canonical grade string, the
  logical shape and dtype, the FNV-1a-128 plane digest) is
  ``__metadata__["torch_grit"]`` (a JSON string).

A packed linear layer whose inputs are permuted before its weight
(``GritLinear.input_perm``, GPTQ act-order) has the permutation as the
ordinary int64 entry ``<layer>.input_perm`` beside ``<layer>.weight``; every
load checks it is a permutation of the layer's inputs.

Every other tensor is an ordinary entry under its own name. Stock
``safetensors.torch.load_file`` opens the file; it sees the planes as uint8
vectors.

Why the descriptor is keyed by the logical name, which is not an entry:
grit-datatype 1.1.0's scanner checks a declared descriptor against the ONE
entry of the same name, taking that entry's shape as the logical shape and its
byte length as the sum of the four planes. Stock safetensors requires the same
entry to hold exactly prod(shape) * element size bytes. No reference grade
stores a whole number of bytes per element (MXFP4 4.25 bits, NVF4 4.50, Q4KS
4.625, I8S24 5.5), so no single entry satisfies both with the true shape; the
only layouts both tools accept make the scanner's check vacuous (a zero-byte
entry with a 0 in its shape, whose gid is then computed for a shape that is not
the tensor's). tests/python/test_checkpoint_scan.py records each candidate
layout with the outcome of both tools. Keyed by the logical name, grit-scan
1.1.0 reports the file clean and does not see the descriptors at all; this
module checks them on every load.
"""

import json
from collections import OrderedDict

import torch
from torch import nn

from ..contract.check import check
from .format import (
    DTYPE_NAMES, DTYPES_BY_NAME, INPUT_PERM_SUFFIX, PLANE_RE, VERIFY_LEVELS, Packed, Plain, write_units,
)
from .read import _grit_error, activation_modes, open_layout
from ..contract.descriptor import Descriptor
from ..contract.errors import GritCheckError, InexpressibleError
from .safetensors_io import TORCH_TO_ST, CheckpointError, tensor_bytes
from ..tensor.grit_tensor import GritTensor


def _units_from_state_dict(state_dict):
    units, sources = [], {}
    for name, t in state_dict.items():
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise ValueError("tensor names are non-empty strings other than '__metadata__'; "
                             "found %r" % (name,))
        if PLANE_RE.match(name):
            raise ValueError("%r ends in .grit.<plane>, which names the planes of packed tensors; "
                             "rename it" % name)
        if isinstance(t, GritTensor):
            if t.transposed:
                raise ValueError("%s is the transposed view of a GritTensor; save the weight "
                                 "itself (W, not W.t())" % name)
            if t.is_int4_groups:
                raise InexpressibleError(name, t.grade_canonical, t.grade.grit_inexpressible)
            u = Packed(name, Descriptor(t.grade_canonical, t.logical_shape,
                                        placement=t.placement_words), DTYPE_NAMES[t.logical_dtype])
            # A corrupted tensor is not saved (level 1), nor sparsity metadata out of the order
            # its grade declares, which a load with verify="digest" refuses (level 2 without a
            # digest reads only that).
            check(u.descriptor, t.planes, level=2 if t.grade._native.has_sp else 1, tensor=name)
            sources[name] = t
        elif isinstance(t, torch.Tensor):
            if t.device.type == "meta":
                raise ValueError("%s is on the meta device: it has no bytes to save" % name)
            if t.dtype not in TORCH_TO_ST:
                raise TypeError("%s: dtype %s has no safetensors name" % (name, t.dtype))
            u = Plain(name, TORCH_TO_ST[t.dtype], tuple(t.shape))
            sources[name] = t
        else:
            raise TypeError("%s: save() takes tensors; found %s" % (name, type(t).__name__))
        units.append(u)
    return units, sources


def save(obj, path, *, max_shard_size=None, grade_policy=None, load_guard=False, activations=None):
    """Write a model's (or a state dict's) tensors as a checked safetensors checkpoint.

    GritTensors become their planes plus a descriptor (see the module doc);
    every other tensor is written unchanged. One file at ``path``, or, when
    ``max_shard_size`` (bytes, or "2GB") is given and the tensors exceed it,
    HF-style shards beside it and ``<path>.index.json``. Deterministic (same
    tensors, same bytes) and atomic: each file is written to a temporary file
    in its folder, fsynced and renamed over the old one, so a file at any of
    these paths is the old one or a complete new one. Shards are renamed one
    by one and the index last; a crash between those renames can leave new
    shards beside the old index, which load() refuses only when the entry
    names disagree. Returns the list of files written.

    ``grade_policy`` (a JSON-able dict; by default the model's
    ``grit_grade_policy``, which ``quantize_(model, "auto")`` sets) is
    recorded in the metadata: the grades were chosen per tensor on purpose.

    The activation mode of each GritLinear that runs ``activations="s8"`` or
    ``"bf16"`` is recorded too (``torch_grit.load(path, model=...)`` sets it
    again); for a state dict, ``activations`` ({module name: "s8" or "bf16"})
    says which layers run which.

    ``load_guard=True`` also writes each packed tensor's load guard (a
    zero-byte entry under its own name, docs/checkpoints.md), so that a
    loader without torch_grit fails on it instead of loading random weights;
    Hugging Face model folders carry it.
    """
    if grade_policy is None and isinstance(obj, nn.Module):
        grade_policy = getattr(obj, "grit_grade_policy", None)
    if grade_policy is not None:
        try:
            json.dumps(grade_policy, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError("save(): grade_policy must be a JSON-able dict; %s" % e) from None
        if not isinstance(grade_policy, dict):
            raise TypeError("save(): grade_policy must be a JSON-able dict; found %s"
                            % type(grade_policy).__name__)
    state_dict = obj.state_dict() if isinstance(obj, nn.Module) else obj
    if not hasattr(state_dict, "items"):
        raise TypeError("save() takes an nn.Module or a state dict; found %s"
                        % type(obj).__name__)
    _refuse_shards(state_dict)
    units, sources = _units_from_state_dict(state_dict)
    check_input_perms(state_dict, str(path))
    for u in units:
        if isinstance(u, Packed):
            u.guard = bool(load_guard)

    def fill(u):
        t = sources[u.name]
        if isinstance(u, Packed):
            return [tensor_bytes(p) for p, n in zip(t.planes, u.plane_bytes) if n]
        return [tensor_bytes(t)]

    return write_units(path, units, fill, max_shard_size=max_shard_size, grade_policy=grade_policy,
                       activations=activations_of(obj) if activations is None else activations)


def _refuse_shards(state_dict):
    """A tensor-parallel model's state holds DTensors, each rank only its part: refused by name."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch without torch.distributed holds no shards
        return
    name = next((k for k, v in state_dict.items() if isinstance(v, DTensor)), None)
    if name is not None:
        raise ValueError("save(): %s is a tensor-parallel shard (a DTensor: parallelize_module ran), and "
                         "this rank holds only its part of it; save() writes whole tensors. Save the model "
                         "before parallelize_module (torch_grit.load(path, model=tp_model) then gives each "
                         "rank its shards)" % name)


def check_input_perms(state, path=None):
    """Every ``<layer>.input_perm`` beside a packed ``<layer>.weight`` in ``state`` is an int64
    [in_features] permutation of 0..in_features-1; else CheckpointError naming the tensor,
    what was expected and what was found."""
    from ..nn.linear import InputPermError, check_input_perm
    for name, perm in state.items():
        if not name.endswith(INPUT_PERM_SUFFIX):
            continue
        w = state.get(name[:-len(INPUT_PERM_SUFFIX)] + ".weight")
        if not isinstance(w, GritTensor):
            continue
        try:
            check_input_perm(perm, int(w.logical_shape[1]), name)
        except InputPermError as e:
            raise CheckpointError(str(e), path, name, field="input_perm", expected=e.expected,
                                  found=e.found) from None


def read_input_perms(lay):
    """{layer name: int64 tensor} for each ``<layer>.input_perm`` entry of checkpoint layout
    ``lay`` beside a packed ``<layer>.weight``: dtype and shape checked from the header before
    anything is read, then the values (CheckpointError naming the tensor)."""
    from safetensors import safe_open
    from ..nn.linear import InputPermError, check_input_perm
    st_to_torch = {v: k for k, v in TORCH_TO_ST.items()}
    out = {}
    for name, (h, e) in sorted(lay.plain.items()):
        owner = name[:-len(INPUT_PERM_SUFFIX)] if name.endswith(INPUT_PERM_SUFFIX) else None
        if owner is None or owner + ".weight" not in lay.packed:
            continue
        in_f = int(lay.packed[owner + ".weight"][1].shape[1])
        try:
            if e.dtype not in st_to_torch:
                raise InputPermError("%s is %s; an input permutation is int64 (I64)" % (name, e.dtype), "I64",
                                     e.dtype)
            check_input_perm(torch.empty(tuple(e.shape), dtype=st_to_torch[e.dtype], device="meta"), in_f, name)
            with safe_open(h.path, framework="pt") as f:
                perm = f.get_tensor(name)
            check_input_perm(perm, in_f, name)
        except InputPermError as err:
            raise CheckpointError(str(err), h.path, name, field="input_perm", expected=err.expected,
                                  found=err.found) from None
        out[owner] = perm
    return out


def activations_of(obj):
    """{module name: mode} for the GritLinear layers of a model that run an activation mode
    ("s8" or "bf16")."""
    from ..nn.linear import GritLinear
    if not isinstance(obj, nn.Module):
        return {}
    return {name: m.activations for name, m in obj.named_modules()
            if isinstance(m, GritLinear) and m.activations is not None}


def load(path, model=None, *, verify="structure", device="cpu", strict=True, activations="recorded"):
    """Load a checkpoint written by ``save`` (or any safetensors file), checked.

    Every descriptor is checked against its planes before any tensor is
    returned: level 1 (frame, grade, placement, plane dtypes and lengths)
    always; ``verify="digest"`` also reads the planes and checks their digest
    (level 2). Any disagreement raises GritCheckError naming the tensor and
    the field; a broken container raises CheckpointError; nothing is returned
    or modified then. Tensors are memory-mapped (safetensors' ``safe_open``).

    Without ``model``: returns a dict name -> tensor (GritTensor for packed
    ones). With ``model``: every ``nn.Linear`` whose weight the file holds
    packed becomes a ``GritLinear`` around it (in the CPU tile layout where the
    layer it replaces was tiled and the grade allows), the other tensors are copied in
    with ``load_state_dict``; with ``strict`` (default) the file's names must
    be the model's (non-persistent buffers, such as position ids some files
    carry, are skipped). Returns the model. ``activations``: ``"recorded"``
    (default) gives each GritLinear the activation mode the file records
    for it; ``"s8"``, ``"bf16"`` or ``None`` sets that mode on every packed
    linear layer (a grade the mode does not take raises, naming the layer).
    """
    from safetensors import SafetensorError, safe_open

    if verify not in VERIFY_LEVELS:
        raise ValueError("verify is one of %s; found %r" % (VERIFY_LEVELS, verify))
    lay = open_layout(path)
    state = {}
    for h in lay.headers:
        try:
            with safe_open(h.path, framework="pt", device=str(device)) as f:
                for name, (hh, _) in lay.plain.items():
                    if hh is h:
                        state[name] = f.get_tensor(name)
                for name, (hh, u) in lay.packed.items():
                    if hh is not h:
                        continue
                    planes = [f.get_tensor(pe.name) if pe is not None else None
                              for pe in u.plane_entries]
                    if verify == "digest":
                        try:
                            check(u.descriptor, planes, level=2, digest=u.digest)
                        except GritCheckError as err:
                            raise _grit_error(str(err), h, name, err.field, err.status,
                                              err.expected, err.found, err.plane) from None
                    state[name] = GritTensor.from_planes(
                        planes, u.grade, u.shape, DTYPES_BY_NAME[u.dtype],
                        placement=tuple(u.descriptor.placement), name=name)
        except SafetensorError as err:
            raise CheckpointError("safetensors refused the file: %s" % err, h.path,
                                  field="safetensors") from None
    state = OrderedDict((k, state[k]) for k in sorted(state))
    check_input_perms(state, str(path))
    if model is None:
        return state
    recorded = activation_modes(lay)
    if activations != "recorded":
        from ..nn.linear import check_activations
        activations = check_activations(activations)
    _check_activations(state, recorded, activations)  # before the model is touched
    fill_model(model, state, strict)
    _set_activations(model, recorded, activations)
    return model


def _check_activations(state, recorded, activations):
    """Every layer that will run an activation mode has a grade that mode takes (s8: an s8 law;
    bf16: a GRIT grade), else ValueError naming it."""
    from ..nn.linear import check_bf16_grade, check_s8_law
    if activations == "recorded":
        modes = dict(recorded)
    elif activations is not None:
        modes = {k[:-len(".weight")]: activations for k, v in state.items()
                 if k.endswith(".weight") and isinstance(v, GritTensor)}
    else:
        return
    for name, mode in modes.items():
        w = state.get(name + ".weight")
        if not isinstance(w, GritTensor):
            raise CheckpointError("the checkpoint records activations=%r for %s, but holds no "
                                  "packed weight %s.weight" % (mode, name, name), None,
                                  field="torch_grit.activations")
        if mode == "s8":
            check_s8_law(name, w.grade_canonical, w.grade.name)
        else:
            check_bf16_grade(name, w.grade)


def _set_activations(model, recorded, activations):
    """The activation modes after a load: recorded per layer, or one mode for every GritLinear."""
    from ..nn.linear import GritLinear
    layers = {name: m for name, m in model.named_modules() if isinstance(m, GritLinear)}
    if activations != "recorded":
        for name, m in layers.items():
            m.set_activations_(activations, name=name)
        return
    for name, mode in recorded.items():
        if name not in layers:
            raise CheckpointError("the checkpoint records activations=%r for %s, which is not a "
                                  "packed linear layer of this model" % (mode, name), None,
                                  field="torch_grit.activations")
        layers[name].set_activations_(mode, name=name)


def fill_model(model, state, strict):
    """Install ``state`` into ``model``: all checks first, then the swaps and copies."""
    from ..nn.linear import GritLinear

    if not isinstance(model, nn.Module):
        raise TypeError("load(model=...) takes an nn.Module; found %s" % type(model).__name__)
    expected = model.state_dict()
    non_persistent = {("%s.%s" % (m, b)) if m else b for m, mod in model.named_modules()
                      for b in mod._non_persistent_buffers_set}
    swaps = []
    for name, w in state.items():
        if not isinstance(w, GritTensor):
            continue
        owner, _, leaf = name.rpartition(".")
        try:
            module = model.get_submodule(owner) if owner else model
        except AttributeError:
            module = None
        if leaf != "weight" or not isinstance(module, nn.Linear) and not isinstance(module, GritLinear):
            raise CheckpointError("the file holds %s packed, but the model has no nn.Linear "
                                  "(or GritLinear) %r to take it (found %s)" % (
                                      name, owner, type(module).__name__ if module is not None
                                      else "nothing"), tensor=name, field="model")
        want = (module.out_features, module.in_features)
        if tuple(w.logical_shape) != want:
            raise CheckpointError("packed weight of shape %s does not fit %s (out, in) = %s" % (
                tuple(w.logical_shape), type(module).__name__, want), tensor=name, field="shape",
                expected=want, found=tuple(w.logical_shape))
        perm = state.get(owner + INPUT_PERM_SUFFIX if owner else INPUT_PERM_SUFFIX[1:])
        swaps.append((module, w, perm))
    perm_names = {k for k, v in state.items() if k.endswith(INPUT_PERM_SUFFIX)
                  and isinstance(state.get(k[:-len(INPUT_PERM_SUFFIX)] + ".weight"), GritTensor)}
    # A swapped layer takes its permutation from the file, whether the model's layer had one or not.
    expected_names = set(expected) | perm_names
    names = set(state) - non_persistent
    missing = sorted(expected_names - names)
    unexpected = sorted(names - expected_names)
    if strict and (missing or unexpected):
        raise CheckpointError("the file and the model disagree: missing from the file %s; not in "
                              "the model %s (pass strict=False to load what matches)"
                              % (missing[:8] + (["..."] if len(missing) > 8 else []),
                                 unexpected[:8] + (["..."] if len(unexpected) > 8 else [])),
                              field="keys", expected=len(expected), found=len(names))
    floats = {k: v for k, v in state.items()
              if not isinstance(v, GritTensor) and k in expected and k not in perm_names}
    for k, v in floats.items():
        if tuple(v.shape) != tuple(expected[k].shape):
            raise CheckpointError("shape %s in the file, %s in the model" % (
                tuple(v.shape), tuple(expected[k].shape)), tensor=k, field="shape",
                expected=tuple(expected[k].shape), found=tuple(v.shape))

    built = {}
    for module, w, perm in swaps:
        device = module.weight.device
        new = GritLinear.from_packed(w if w.device == device else w.to(device), input_perm=perm)
        if isinstance(module, GritLinear) and not module.weight.tiled and new.weight.tiled:
            new.untile_()  # a layer its owner untiled keeps GRIT's planes in memory
        new.bias = module.bias  # the same Parameter: optimizers and ties keep pointing at it
        built[id(module)] = new
    for parent in model.modules():
        for child_name, child in list(parent._modules.items()):
            if child is not None and id(child) in built:
                setattr(parent, child_name, built[id(child)])
    model.load_state_dict(floats, strict=False)
