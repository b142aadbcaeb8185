"""Section 6, reproduced: `data` (PTB and Fashion-MNIST from their packages), `models` (the language and vision models),
`training` (runs that record the laws), `analysis` (fits, bounds and figures) and `sweeps` (grids of runs, resumable)."""
from .models import PRESETS, build_model
from .training import TrainConfig, train
from .sweeps import sweep

__all__ = ['PRESETS', 'build_model', 'TrainConfig', 'train', 'sweep']
