"""torch_grit inside other stacks: ``hf`` (transformers' quantizer registry, model
folders, save_pretrained; PEFT and sentence-transformers ride on it)."""
