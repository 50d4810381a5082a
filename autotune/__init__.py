"""autotune: find the fastest way to train a PyTorch model on a given NVIDIA GPU."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from autotune.errors import AutotuneError, InvalidCombination
from autotune.measurement import Status, TrialResult

if TYPE_CHECKING:
    from autotune.tuned.config import TunedConfig

__all__ = ["AutotuneError", "InvalidCombination", "Status", "TrialResult", "__version__", "load"]
__version__ = "0.1.0"


def load(path: str | os.PathLike[str]) -> TunedConfig:
    """Read a tuned config written by ``autotune export``; then ``model, step_ctx = cfg.apply(model, optimizer)``.

    See :func:`autotune.tuned.file.load`. Imported on first use, so ``import autotune`` stays light.
    """
    from autotune.tuned.file import load as load_tuned_config  # deferred: torch, ~1 s; `import autotune` stays light

    return load_tuned_config(path)
