"""torch_grit in the Hugging Face stack.

``config`` (``GritConfig``, quant_method "grit"), ``quantizer`` (the
``HfQuantizer`` that builds packed models in ``from_pretrained``), ``folder``
(complete model folders: the converter's and ``save_pretrained``'s) and
``register`` (registration with transformers when it is imported). Importing
this package imports transformers.
"""

from .config import GritConfig
from .folder import save_pretrained
from .register import register

register()

__all__ = ["GritConfig", "save_pretrained", "register"]
