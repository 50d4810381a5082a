"""The numerics guard of a trial: the first step's loss against a strict-fp32 reference, every loss finite.

A configuration that trains fast but wrong (fp16 overflow, a cancelling loss in bf16) is a trial
with status ``numerics``, not a winner.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from autotune import workloads
from autotune.errors import AutotuneError, NumericsError
from autotune.kernels.untuned import cannot_run_here, first_configs
from autotune.knobs.backends import strict_fp32

__all__ = [
    "FLOAT8_LOSS_TOLERANCE",
    "LOSS_TOLERANCE",
    "Reference",
    "check_first_loss",
    "check_losses",
    "loss_tolerance",
    "pair",
    "reference_pass",
]

# First-step loss vs the strict-fp32 reference on the same weights and batch: relative error allowed.
LOSS_TOLERANCE = {"fp32": 1e-3, "default": 1e-2, "tf32": 1e-2, "fp16": 3e-2, "bf16": 5e-2}
# The same for a float8 trial (any recipe; float8 runs in bf16 autocast): bf16's. On an H200 the 1B llama's first
# step (batch 4, sequence 2048, its 80 or 32 largest layers in FP8) was 2.2e-4 from the fp32 reference in tensorwise
# and 8.0e-5 in rowwise, far inside it: FP8's scaled GEMMs need no looser guard, and a broken conversion (NaN,
# unscaled overflow) still lands far outside.
FLOAT8_LOSS_TOLERANCE = LOSS_TOLERANCE["bf16"]


def pair(batch: Any) -> tuple[Any, Any]:
    """``(inputs, targets)`` of a batch that a ``loss_fn`` takes, or a clear error for one it cannot."""
    if isinstance(batch, tuple | list) and len(batch) == 2:
        return batch[0], batch[1]
    raise AutotuneError(f"loss_fn needs (inputs, targets) batches; the workload's batch is a {type(batch).__name__}")


class Reference(NamedTuple):
    """The reference pass: its strict-fp32 ``loss`` (None without a ``loss_fn``), and the ``triton.autotune`` kernels
    it launched on their first configs, which the trial's own first steps will autotune (import paths)."""

    loss: float | None
    autotuning: frozenset[str] = frozenset()


def reference_pass(workload: workloads.Workload, batch: Any) -> Reference:
    """The loss of the untouched model in strict fp32 on ``batch``: the guard's yardstick.

    None for a workload without ``loss_fn`` (its own ``train_step`` only): there is no loss to
    recompute, so its first step is only checked to be finite. The workload's ``triton.autotune``
    kernels run their first configs here, choosing nothing (:mod:`autotune.kernels.untuned`); where
    one of those cannot run on this batch (what Triton's autotuner skips a config for), the pass runs
    again with every kernel choosing as ever (and none is left to autotune). Any other failure is the
    trial's, raised at once.
    """
    loss_fn = workload.loss_fn
    if loss_fn is None:
        return Reference(None)
    inputs, targets = pair(batch)

    def strict_fp32_loss() -> float:
        with strict_fp32(), torch.no_grad():
            return float(loss_fn(workload.model(inputs), targets))

    with first_configs() as cut:
        try:
            loss = strict_fp32_loss()
        except Exception as exc:
            if not cut.cut or not cannot_run_here(exc):
                raise
        else:
            return Reference(loss, frozenset(cut.launched))
    return Reference(strict_fp32_loss())


def loss_tolerance(precision: str, float8: str = "none") -> float:
    """The first step's relative error allowed: the precision's, or :data:`FLOAT8_LOSS_TOLERANCE` under float8."""
    return LOSS_TOLERANCE[precision] if float8 == "none" else FLOAT8_LOSS_TOLERANCE


def check_first_loss(first: float, reference: float | None, precision: str, float8: str = "none") -> float | None:
    """The first step's relative error against ``reference`` (None without one); NumericsError past tolerance."""
    computed = f"precision={precision}" + (f", float8={float8}" if float8 != "none" else "")
    if not math.isfinite(first):
        raise NumericsError(f"loss is {first} at the first step ({computed})")
    if reference is None:
        return None
    rel = abs(first - reference) / max(abs(reference), 1e-6)
    tolerance = loss_tolerance(precision, float8)
    if rel > tolerance:
        raise NumericsError(
            f"first-step loss {first:.6g} vs fp32 reference {reference:.6g}: "
            f"relative error {rel:.2g} > {tolerance:g} allowed for {computed}"
        )
    return rel


def check_losses(losses: list[torch.Tensor], precision: str) -> None:
    """NumericsError naming the first step whose loss is not finite (one device sync for them all)."""
    if bool(torch.isfinite(torch.stack(losses)).all()):
        return
    bad = next(i for i, loss in enumerate(losses) if not math.isfinite(float(loss)))
    raise NumericsError(f"loss became {float(losses[bad])} at step {bad} (precision={precision})")
