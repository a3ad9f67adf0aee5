"""Registering quant_method "grit" with transformers.

``register()`` adds GritConfig and GritHfQuantizer to transformers' registries
(``register_quantization_config``, ``register_quantizer``) and GritConfig to
the config types whose loading attributes (``verify``) from_pretrained's
argument may set over the folder's stored config. It is idempotent: a second
call (a re-import) finds the entries in place and does nothing, where
transformers' own decorators would raise.
"""

from transformers.quantizers import auto as _auto
from transformers.quantizers import register_quantization_config, register_quantizer

from .config import QUANT_METHOD, GritConfig
from .quantizer import GritHfQuantizer


def register():
    config_map, quantizer_map = _auto.AUTO_QUANTIZATION_CONFIG_MAPPING, _auto.AUTO_QUANTIZER_MAPPING
    for registry, cls in ((config_map, GritConfig), (quantizer_map, GritHfQuantizer)):
        found = registry.get(QUANT_METHOD)
        if found is not None and found.__qualname__ != cls.__qualname__:
            raise RuntimeError("transformers already has a quant_method %r: %s.%s, not torch_grit's"
                               % (QUANT_METHOD, found.__module__, found.__qualname__))
    if config_map.get(QUANT_METHOD) is None:
        register_quantization_config(QUANT_METHOD)(GritConfig)
    if quantizer_map.get(QUANT_METHOD) is None:
        register_quantizer(QUANT_METHOD)(GritHfQuantizer)
    if not any(t.__qualname__ == GritConfig.__qualname__ and t.__module__ == GritConfig.__module__
               for t in _auto.LOADING_ATTRIBUTES_CONFIG_TYPES):
        # merge_quantization_configs copies get_loading_attributes() only for these types.
        _auto.LOADING_ATTRIBUTES_CONFIG_TYPES = tuple(_auto.LOADING_ATTRIBUTES_CONFIG_TYPES) + (GritConfig,)


__all__ = ["register"]
