"""The blocks people train, read for the engine: `calls` (float64 copies, `NotStated`, how a model calls a block and the
module's own forward), `readers` (the attention layouts, MLPs and MoE of PyTorch and Hugging Face transformers) and `adapters` (`adapt`: a block with the laws the theory states for exactly its
configuration, checked, and the structure checks kept between runs)."""
from .calls import NotStated, capture_calls
from .readers import READERS
from .adapters import adapt, Adapted, BlockCheck, STATUSES, init_generic, STRUCTURES

__all__ = ['adapt', 'Adapted', 'BlockCheck', 'STATUSES', 'NotStated', 'READERS', 'capture_calls', 'init_generic', 'STRUCTURES']
