"""Choosing and applying grades to models.

``quantize_model`` (``quantize_``: nn.Linear -> GritLinear, with its handler
registry and per-layer report), ``auto`` (``grade="auto"``: the cheapest grade
that meets an SQNR budget), ``profile`` (every candidate grade's error and
size before packing), ``report`` (weight and output error of a packed model)
and ``quality`` (a causal LM's NLL on fixed inputs). The public functions are
re-exported by ``torch_grit`` itself; import the modules for the rest.
"""
