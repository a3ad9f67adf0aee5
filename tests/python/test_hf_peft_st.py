"""PEFT LoRA over packed layers and sentence-transformers on a converted folder."""

import os

import pytest
import torch

import torch_grit
from torch_grit import GritTensor
from torch_grit.nn import GritLinear

import hf_cases as hc

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")
from transformers import AutoModel  # noqa: E402

transformers.logging.set_verbosity_error()


@pytest.fixture(scope="module")
def minilm_dst(tmp_path_factory):
    return hc.convert(hc.minilm_folder(), tmp_path_factory.mktemp("minilm") / "dst")


def test_sentence_transformers_encodes_like_quantize_(minilm_dst):
    st = pytest.importorskip("sentence_transformers")
    sentences = ["A packed weight carries its contract.", "Two bytes, two meanings.",
                 "short", "The scanner reads GGUF and safetensors files alike."]
    packed = st.SentenceTransformer(minilm_dst, device="cpu")
    assert any(isinstance(m, GritLinear) for m in packed.modules())
    reference = st.SentenceTransformer(hc.minilm_folder(), device="cpu")
    float_emb = reference.encode(sentences, convert_to_tensor=True)
    torch_grit.quantize_(reference, "MXFP4")
    a = packed.encode(sentences, convert_to_tensor=True)
    b = reference.encode(sentences, convert_to_tensor=True)
    assert a.shape == (4, 384) and torch.equal(a, b)
    cos = torch.nn.functional.cosine_similarity(a, float_emb)
    assert cos.min() > 0.9  # packed, not random: close to the float model


def test_peft_lora_trains_over_frozen_packed_layers(minilm_dst, tmp_path):
    model = AutoModel.from_pretrained(minilm_dst)
    pm = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_alpha=8,
                                                    target_modules=["query", "value"]))
    wrapped = [m for m in pm.modules() if isinstance(m, peft.tuners.lora.Linear)]
    assert len(wrapped) == 12 and all(isinstance(m.base_layer, GritLinear) for m in wrapped)
    packed = {n: [p.clone() for p in w.planes] for n, w in pm.named_parameters()
              if isinstance(w, GritTensor)}
    assert packed and not any(w.requires_grad for w in pm.parameters() if isinstance(w, GritTensor))
    ids = torch.randint(1000, 2000, (4, 10), generator=torch.Generator().manual_seed(0))
    target = torch.randn(4, 10, 384, generator=torch.Generator().manual_seed(1))
    opt = torch.optim.Adam([p for p in pm.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(8):
        loss = (pm(input_ids=ids).last_hidden_state - target).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    for n, w in pm.named_parameters():
        if isinstance(w, GritTensor):
            assert all(torch.equal(p, q) for p, q in zip(w.planes, packed[n])), n
    pm.save_pretrained(tmp_path / "adapter")
    assert os.path.exists(tmp_path / "adapter" / "adapter_model.safetensors")
    again = peft.PeftModel.from_pretrained(AutoModel.from_pretrained(minilm_dst), tmp_path / "adapter")
    with torch.no_grad():
        assert torch.equal(pm(input_ids=ids).last_hidden_state,
                           again(input_ids=ids).last_hidden_state)


def test_merge_and_unload_is_refused_with_the_reason(minilm_dst):
    pm = peft.get_peft_model(AutoModel.from_pretrained(minilm_dst),
                             peft.LoraConfig(r=2, target_modules=["query"]))
    for safe in (False, True):
        with pytest.raises(torch_grit.contract.errors.UnsupportedOpError,
                           match="merge_and_unload.*quantizing again"):
            pm.merge_and_unload(safe_merge=safe)
    assert isinstance(pm.base_model.model.encoder.layer[0].attention.self.query.base_layer,
                      GritLinear)
