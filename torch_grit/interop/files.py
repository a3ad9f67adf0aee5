"""``torch_grit.load`` / ``torch_grit.save``: the format follows the path.

A path ending in ``.gguf`` is a GGUF file (``interop.gguf``); anything else is
a torch_grit safetensors checkpoint (``checkpoint.save_load``).
"""

from ..checkpoint import save_load
from ..checkpoint.format import VERIFY_LEVELS
from ..parallel import is_sharded, load_sharded


def is_gguf(path):
    return str(path).lower().endswith(".gguf")


def save(obj, path, **kwargs):
    """Write a model's (or a state dict's) tensors to ``path``: a checked safetensors
    checkpoint (``checkpoint.save_load.save``, its keywords), or for ``*.gguf`` a GGUF
    file (``interop.gguf.save_gguf``: keywords ``arch``, ``names``, ``metadata``)."""
    if is_gguf(path):
        from .gguf import save_gguf

        return save_gguf(obj, path, **kwargs)
    return save_load.save(obj, path, **kwargs)


def load(path, model=None, *, verify="structure", device="cpu", strict=True, requantize=None,
         activations="recorded"):
    """Load ``path`` checked: a safetensors checkpoint (``checkpoint.save_load.load``) or,
    for ``*.gguf``, a GGUF file (``interop.gguf.load_gguf``; ``requantize=GRADE`` packs
    the block types GRIT cannot name, else they are refused; a GGUF file has no
    digest, so ``verify`` changes nothing there: every tensor is read and checked).
    With ``model``, the tensors go into it as ``checkpoint.save_load.load`` does, or, for a
    model ``parallelize_module`` has sharded, each rank reads only its shards' bytes
    (``parallel.load_sharded``);
    ``activations`` ("recorded", None, "s8" or "bf16") sets the packed layers' activation
    mode (a GGUF file records none, so "recorded" keeps float activations)."""
    if not is_gguf(path):
        if requantize is not None:
            raise ValueError("requantize= applies to GGUF files; %s is a safetensors checkpoint" % path)
        if model is not None and is_sharded(model):  # parallelize_module ran: each rank reads its shards
            if str(device) != "cpu":
                raise ValueError("a sharded load places each shard where the model's DTensors are; device= "
                                 "does not apply")
            return load_sharded(path, model, verify=verify, strict=strict, activations=activations)
        return save_load.load(path, model, verify=verify, device=device, strict=strict,
                              activations=activations)
    from .gguf import load_gguf

    if verify not in VERIFY_LEVELS:
        raise ValueError("verify is one of %s; found %r" % (VERIFY_LEVELS, verify))
    # A GGUF file carries no plane digest: at either level every tensor is read in full,
    # its blocks checked (the refusals of contract.ggml_blocks) and its planes checked at
    # level 1 as the GritTensor is built, before anything is returned.
    state = load_gguf(path, requantize=requantize)
    if str(device) != "cpu":
        state = type(state)((k, v.to(device)) for k, v in state.items())
    if model is None:
        return state
    if activations != "recorded":
        from ..nn.linear import check_activations
        activations = check_activations(activations)
    save_load._check_activations(state, {}, activations)
    save_load.fill_model(model, state, strict)
    save_load._set_activations(model, {}, activations)
    return model
