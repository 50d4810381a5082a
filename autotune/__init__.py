"""autotune: find the fastest way to train a PyTorch model on a given NVIDIA GPU."""

from autotune.errors import AutotuneError, InvalidCombination
from autotune.results import Status, TrialResult

__all__ = ["AutotuneError", "InvalidCombination", "Status", "TrialResult", "__version__"]
__version__ = "0.1.0"
