"""``torch-grit quantize --report``: torch_grit.report's numbers for a streamed conversion.

The converter hands each tensor over as it packs it (source weight, its
GritTensor, the source's bias); ``report.layer_error`` measures it exactly as
``torch_grit.report`` measures a GritLinear in memory, on the same fixed probe
(``report.probe_input``), and the tensor is dropped. File sizes are read from
disk after the files are committed: complete bytes of every file written
(shards and index included) and of the source's safetensors files.
"""

import os

from ..nn.linear import GritLinear
from ..quantization.report import FileBytes, Report, file_bytes, layer_error, probe_input


class ConversionReport:
    """Collects one LayerError per packed tensor; ``build`` adds the file sizes."""

    def __init__(self, probe_rows=8, seed=0):
        self.probe_rows, self.seed = probe_rows, seed
        self.layers = []

    def on_packed(self, name, weight, packed, bias):
        layer = GritLinear.from_packed(packed, bias)
        x = probe_input(weight.shape[1], self.probe_rows, self.seed)
        self.layers.append(layer_error(name, weight, bias, layer, x))

    def build(self, source_paths, written_paths):
        return Report(list(self.layers), files_bytes(source_paths), files_bytes(written_paths))


def files_bytes(paths):
    """FileBytes over a checkpoint's files: complete sizes summed, safetensors headers summed
    (an index JSON counts in the total; it has no safetensors header)."""
    paths = [str(p) for p in paths]
    total = header = 0
    for p in paths:
        if p.endswith(".json"):
            total += os.path.getsize(p)
        else:
            fb = file_bytes(p)
            total += fb.total
            header += fb.header
    index = [p for p in paths if p.endswith(".json")]
    label = paths[0] if len(paths) == 1 else (index[0] if index else os.path.dirname(paths[0]))
    return FileBytes(label, total, header)
