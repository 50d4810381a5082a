"""A step's model FLOPs counted once per study: the first trial of a model and batch shape counts them
(:func:`autotune.trial.flops.count_step_flops`), the trials after it read the count from the study's folder.

Counting runs the step's forward and backward on fake tensors, in Python, operator by operator: on the 2-core CPU
machine 0.5-1.1 s of a tiny ResNet-50 trial that takes 2.4 s in all, about a second of a Llama 1B trial's set-up on
a GPU host, while the GPU waits. The count does not depend on the knobs (it is made on the untouched model), only on
the model and the batch's shapes, and a study measures each of those many times: the same batch size under other
knobs, every re-measurement and finalist run.

The key is what decides the count: the workload, its preset, arguments and own params, the seed, the model's modules
and parameter shapes as built, the loss function, the first batch's shapes and dtypes, and torch's version (its
counting formulas). A count that could not be made is kept too, with its reason: the next trial would fail the same
way. Each key is one small JSON file in ``<study cache>/flops/``, written whole (:mod:`autotune.atomicfile`), so
workers on one folder never see half of one; an unreadable file is counted again. Without a study's folder (``autotune
trial`` alone) every trial counts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autotune import workloads
from autotune.atomicfile import write_cache_file
from autotune.errors import AutotuneError
from autotune.trial.flops import FlopCount, count_step_flops

__all__ = ["FOLDER", "FlopCache"]

FOLDER = "flops"  # in the study's compile cache folder


@dataclass(frozen=True)
class FlopCache:
    """Where a study keeps its counts (``folder``) and what the spec says of the model it builds (``model``: the
    workload, preset, arguments and params, seed)."""

    folder: Path
    model: dict[str, Any]

    @classmethod
    def in_study(cls, cache_dir: str | None, model: dict[str, Any]) -> FlopCache | None:
        """The cache of the study whose compile cache folder is ``cache_dir``; None without one."""
        return None if cache_dir is None else cls(Path(cache_dir) / FOLDER, model)

    def count(self, workload: workloads.Workload, batch: Any) -> FlopCount:
        """The step's FLOPs on ``batch`` as :func:`~autotune.trial.flops.count_step_flops` counts them, read from the
        folder where a trial of the same model and batch shapes counted them before."""
        path = self.folder / f"{self._key(workload, batch)}.json"
        with_count = _read(path)
        if with_count is not None:
            return with_count
        counted = count_step_flops(workload, batch)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_cache_file(path, json.dumps(counted._asdict()).encode())
        except (OSError, AutotuneError):  # a full disk or a read-only folder: the next trial counts again
            pass
        return counted

    def _key(self, workload: workloads.Workload, batch: Any) -> str:
        model = workload.model
        shapes = [(name, list(p.shape)) for name, p in model.named_parameters(remove_duplicate=False)]
        loss = workload.loss_fn
        identity = {
            **self.model,
            "torch": torch.__version__,
            "modules": repr(model),
            "parameters": shapes,
            "loss": f"{getattr(loss, '__module__', '')}.{getattr(loss, '__qualname__', type(loss).__name__)}",
            "own_step": workload.train_step is not None,
            "batch": _signature(batch),
        }
        text = json.dumps(identity, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read(path: Path) -> FlopCount | None:
    try:
        data = json.loads(path.read_text())
        return FlopCount(data["flops"], data["reason"])
    except (OSError, ValueError, KeyError, TypeError):  # not there yet, or unreadable: count it
        return None


def _signature(value: Any) -> Any:
    """What of ``value`` the count depends on: each tensor's shape and dtype, in the batch's own nesting."""
    if isinstance(value, torch.Tensor):
        return [list(value.shape), str(value.dtype)]
    if isinstance(value, tuple | list):
        return [_signature(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _signature(item) for key, item in value.items()}
    return repr(value)
