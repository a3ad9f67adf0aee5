"""llama.cpp's conventions for a GGUF model file: tensor names, row order, hyperparameters, vocab.

A GGUF file that llama.cpp runs is more than a container of tensors: the tensors carry
llama.cpp's names (``blk.N.attn_q.weight``, from gguf-py's ``TensorNameMap``), the attention
projections of a Llama carry their rows in the order llama.cpp's rotary embedding expects,
the hyperparameters sit in ``<arch>.*`` keys, and the tokenizer in ``tokenizer.ggml.*``.
``plan`` (layout.py) plans that for the architectures of ``ARCHES`` (arches.py) from a Hugging
Face config; the vocab comes from a tokenizer folder (vocab.py). Rows are independent in every
GRIT grade and every ggml block type (a block never spans two rows), so reordering rows moves
bytes and changes no value: the descriptor of a reordered tensor is the descriptor of the original.
"""

from .arches import ARCHES, POOLING, Arch
from .common import config_dict
from .layout import LAYOUTS, Layout, plan
from .vocab import tokenizer_folder, write_vocab

__all__ = ["ARCHES", "Arch", "LAYOUTS", "Layout", "POOLING", "config_dict", "plan", "tokenizer_folder",
           "write_vocab"]
