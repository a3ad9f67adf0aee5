"""Complete Hugging Face model folders of GRIT packed weights.

Two writers, one result: ``complete_folder`` (after ``torch-grit quantize``
converted a model folder's weights) copies every file that is not a weight,
adds ``quantization_config`` to config.json and a note to the model card;
``save_pretrained`` writes a loaded or quantized model's config and weights.
Both write the weights with torch_grit's writer (deterministic bytes, each
packed weight with its load guard) and leave out the non-persistent buffers
transformers neither loads nor saves (BERT's ``embeddings.position_ids``).
"""

import json
import os
import shutil
import tempfile

import transformers
from transformers.modeling_utils import remove_tied_weights_from_state_dict

from ...checkpoint.format import META_GRADE_POLICY, META_TORCH_GRIT
from ...checkpoint.save_load import activations_of, save
from ...nn.linear import GritLinear
from ...quantization.profile import short_name
from ...tensor.grit_tensor import GritTensor
from .config import VERSION, GritConfig

try:
    from torch.distributed.tensor import DTensor
except ImportError:  # a torch without torch.distributed
    DTensor = None

# What a model folder holds that is weights: not copied, the converter writes its own.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf",
                   ".onnx", ".safetensors.index.json", ".bin.index.json")
CARD_MARK = "<!-- torch_grit -->"
DEFAULT_MAX_SHARD_SIZE = "50GB"  # transformers 5's save_pretrained default


def _is_weight(name):
    return name.endswith(WEIGHT_SUFFIXES)


def _model_class(config):
    for arch in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, arch, None)
        if cls is not None:
            return cls
    return transformers.AutoModel


def skipped_buffers(src):
    """Names in a model folder's weights that the model's class holds as non-persistent buffers.

    transformers neither loads nor saves them (they are recomputed), so a GRIT
    folder leaves them out: with them, ``from_pretrained`` reports unexpected
    keys and the converter's bytes would differ from ``save_pretrained``'s.
    """
    import torch
    try:
        config = transformers.AutoConfig.from_pretrained(src)
    except (ValueError, KeyError):
        return set()  # a model type transformers does not know: no class to ask
    cls = _model_class(config)
    with torch.device("meta"):
        model = cls.from_config(config) if cls is transformers.AutoModel else cls(config)
    persistent = set(model.state_dict())
    names = set()
    prefix = getattr(model, "base_model_prefix", "") or ""
    for name, _ in model.named_buffers():
        if name not in persistent:
            names.add(name)
            if prefix:
                names.add(prefix + "." + name)
                if name.startswith(prefix + "."):
                    names.add(name[len(prefix) + 1:])
    return names


def _write_text(path, text):
    """Atomically: a temporary file in the same folder, renamed over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def card_note(config):
    return ("\n%s\n## GRIT packed weights\n\nThe linear layers of this folder are packed with "
            "[torch_grit](https://pypi.org/project/torch-grit/) (quantization_config in config.json: "
            "grade %s). Install it (`pip install 'torch_grit>=%s'`) and `import torch_grit` before "
            "`from_pretrained`; without it, transformers refuses the folder (each packed weight's "
            "load guard does not fit the float layer) rather than loading random weights.\n"
            % (CARD_MARK, config.grade, config.torch_grit_version))


def complete_folder(src, dst, config):
    """Copy every non-weight file of model folder ``src`` into ``dst`` and write config.json.

    ``config`` is the GritConfig describing ``dst``'s weights. Files are
    copied first and config.json written last, each atomically, so a folder
    with a config.json naming quant_method "grit" is complete.
    """
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = os.path.relpath(root, src)
        out = os.path.join(dst, rel) if rel != "." else dst
        os.makedirs(out, exist_ok=True)
        for name in sorted(files):
            if _is_weight(name) or (rel == "." and name == "config.json"):
                continue
            target = os.path.join(out, name)
            if rel == "." and name == "README.md":
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    text = f.read()
                if CARD_MARK not in text:
                    text = text.rstrip("\n") + "\n" + card_note(config)
                _write_text(target, text)
                continue
            shutil.copyfile(os.path.join(root, name), target + ".tmp-grit")
            os.replace(target + ".tmp-grit", target)
    if not os.path.exists(os.path.join(src, "README.md")):
        _write_text(os.path.join(dst, "README.md"), card_note(config).lstrip("\n"))
    with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict):
        raise ValueError("%s/config.json is not a JSON object" % src)
    doc["quantization_config"] = config.to_dict()
    # transformers' own layout (PretrainedConfig.to_json_string): indent 2, keys sorted
    _write_text(os.path.join(dst, "config.json"), json.dumps(doc, indent=2, sort_keys=True) + "\n")


def folder_config(grade, reports, budget_db=None, candidates=None, activations=None):
    """The GritConfig of a folder the converter wrote (``reports``: its TensorReports;
    ``activations``: "s8" or "bf16" when every packed layer runs that activation law)."""
    from ...checkpoint.convert import DEFAULT_EXCLUDE
    exact = sorted(r.name[:-len(".weight")] for r in reports
                   if r.action == "kept" and r.name.endswith(".weight") and len(r.shape) == 2
                   and r.dtype in ("F32", "F16", "BF16") and not DEFAULT_EXCLUDE.search(r.name))
    if isinstance(grade, str):
        return GritConfig(grade="auto", budget_db=budget_db,
                          candidates=[g.canonical for g in candidates], modules_to_not_convert=exact,
                          activations=activations)
    return GritConfig(grade=short_name(grade), modules_to_not_convert=exact, activations=activations)


def config_for(model):
    """The GritConfig of a model quantized in memory (quantize_ or from_pretrained)."""
    existing = getattr(getattr(model, "config", None), "quantization_config", None)
    if isinstance(existing, GritConfig):
        return existing
    grades = sorted({short_name(m.weight.grade) for m in model.modules()
                     if isinstance(m, GritLinear)})
    if not grades:
        raise ValueError("save_pretrained: the model holds no packed layer; save a float model "
                         "with transformers' own save_pretrained")
    policy = getattr(model, "grit_grade_policy", None)
    exact = sorted(n for n, m in model.named_modules()
                   if type(m).__name__ == "Linear" and not isinstance(m, GritLinear))
    if policy is not None:
        return GritConfig(grade="auto", budget_db=policy.get("budget_db"),
                          candidates=policy.get("candidates"), modules_to_not_convert=exact)
    if len(grades) > 1:
        raise ValueError("save_pretrained: the model mixes grades %s without a grade policy; "
                         "quantize it with one grade or with grade=\"auto\"" % grades)
    return GritConfig(grade=grades[0], modules_to_not_convert=exact)


def save_pretrained(model, save_directory, *, max_shard_size=DEFAULT_MAX_SHARD_SIZE, state_dict=None,
                    is_main_process=True, push_to_hub=False, **kwargs):
    """``model.save_pretrained`` for a GRIT packed transformers model: a folder that loads back.

    Writes config.json (with the quantization_config), the generation config
    when the model generates, and the weights through torch_grit's writer
    (tied weights once, each packed weight with its load guard; shards and an
    index past ``max_shard_size``). Models carrying transformers-managed PEFT
    adapters save their adapters the stock way.
    """
    cls_save = type(model).save_pretrained
    if getattr(model, "_hf_peft_config_loaded", False):
        return cls_save(model, save_directory, max_shard_size=max_shard_size,
                        state_dict=state_dict, is_main_process=is_main_process,
                        push_to_hub=push_to_hub, **kwargs)
    if push_to_hub:
        # A designed refusal: nothing here can reach a hub to test an upload against.
        raise ValueError("save_pretrained(push_to_hub=True) on a GRIT model: torch_grit writes "
                         "the folder only; save it, then upload it with huggingface_hub's "
                         "upload_folder")
    unknown = sorted(k for k in kwargs if k not in ("safe_serialization", "variant", "token"))
    if unknown or kwargs.get("variant"):
        raise TypeError("save_pretrained of a GRIT model does not take %s"
                        % (unknown or ["variant"]))
    if state_dict is None:
        state_dict = model.state_dict()
    if any(DTensor is not None and isinstance(v, DTensor) for v in state_dict.values()):
        # a tensor-parallel model: every rank gathers each whole tensor (a collective), and the
        # main process writes them
        state_dict = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in state_dict.items()}
    if not is_main_process:
        return None
    if os.path.isfile(save_directory):
        raise NotADirectoryError("save_pretrained: %s is a file, not a folder" % save_directory)
    os.makedirs(save_directory, exist_ok=True)
    config = config_for(model)
    modes = activations_of(model)  # per layer in the weights' metadata
    packed_layers = [m for m in model.modules() if isinstance(m, GritLinear)]
    # the folder-wide word only when every packed layer runs it; a mixture lives in the metadata
    common = set(modes.values())
    config.activations = (common.pop() if packed_layers and len(modes) == len(packed_layers) and len(common) == 1
                          else None)
    model.config.quantization_config = config
    model.config.dtype = str(model.dtype).split(".")[1]
    model.config.architectures = [type(model).__name__]
    packed = {k: v for k, v in state_dict.items() if isinstance(v, GritTensor)}
    # transformers finds ties by storage pointer, which a GritTensor (a wrapper) has not
    state_dict = remove_tied_weights_from_state_dict(
        {k: v for k, v in state_dict.items() if k not in packed}, model)
    state_dict.update(packed)
    for key in getattr(model, "_keys_to_ignore_on_save", None) or []:
        state_dict.pop(key, None)
    for name, t in state_dict.items():
        if isinstance(t, GritTensor) and t.tiled:
            state_dict[name] = t.untile()
    written = save(state_dict, os.path.join(save_directory, "model.safetensors"),
                   max_shard_size=max_shard_size, load_guard=True,
                   grade_policy=getattr(model, "grit_grade_policy", None), activations=modes)
    keep = {os.path.basename(p) for p in written}
    for name in os.listdir(save_directory):  # weight files of an earlier save
        if _is_weight(name) and name.startswith(("model", "pytorch_model")) and name not in keep:
            os.unlink(os.path.join(save_directory, name))
    model.config.save_pretrained(save_directory)
    if model.can_generate() and getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(save_directory)
    return written


def bound_save_pretrained(self, save_directory, **kwargs):
    """The save_pretrained a GRIT model from ``from_pretrained`` carries (see save_pretrained)."""
    return save_pretrained(self, save_directory, **kwargs)


def grade_policy_of(layout):
    """The grade policy a checkpoint records (grades chosen per tensor), or None."""
    for h in layout.headers:
        raw = h.metadata.get(META_TORCH_GRIT)
        if raw:
            policy = json.loads(raw).get(META_GRADE_POLICY)
            if policy is not None:
                return policy
    return None


__all__ = ["complete_folder", "save_pretrained", "skipped_buffers", "config_for",
           "VERSION"]
