"""The GRIT checkpoint: safetensors files whose packed tensors carry descriptors.

``safetensors_io`` (the container: header parse, atomic writes),
``format`` (where planes and descriptors go, shards, the index),
``read`` (opening a file, an index or a folder, checked before use),
``save_load`` (``torch_grit.save`` / ``torch_grit.load``), ``convert``
(the streaming converter behind ``torch-grit quantize``) and
``convert_report`` (its error report).
"""
