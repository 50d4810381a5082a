"""The model FLOPs of one training step, counted once per trial on a stand-in of the model that holds no memory.

How: :class:`torch.utils.flop_counter.FlopCounterMode` around one forward pass, loss and backward pass of the
workload's untouched eager model, its parameters and buffers swapped (``torch.func.functional_call``) for fake
tensors on the ``meta`` device (``FakeTensorMode``), and the trial's first batch made fake the same way. Shapes flow
through every operation and nothing is computed or allocated: a Llama 1B step at batch 8 x 2048 tokens is counted in
about a second of CPU, no GPU time and no memory, and the real model (its weights, gradients, random state) is left
as it was. The count is made at the trial's own batch size and sequence length, so it is exact for the timed step,
not a scaled estimate; the step is never run twice for it.

What counts: the matrix multiplications and convolutions of the forward and backward passes, by FlopCounterMode's
formulas (2 FLOPs per multiply-add): what "6 x parameters per token, plus attention" approximates for a decoder.
Elementwise work, norms, softmax and the optimizer step are left out, as the usual definition of model FLOPs does.

It is counted before the knobs are applied, so every configuration of a study divides the same count by its own
step time: FP8's swapped layers, activation checkpointing's recomputed forward and the compiler change the time,
not the work. On ``meta``, ``scaled_dot_product_attention`` runs its math form, so attention counts as its two
matmuls forward and four backward whichever kernel the GPU runs (flash attention's backward recomputes the scores:
hardware FLOPs that are not model FLOPs), and causal attention counts the whole score matrix, as the usual
"plus attention" term does.

The model and its loss are swapped together, so a loss that reads the model's parameters itself (a fused LM head
takes the head's weight) counts too; autotune's own Triton kernels count as the torch ops they replace (on ``meta``
they run those). Nothing is counted (a value saying why, never a failed trial) for a workload whose step is its own
``train_step``, or whose model cannot run on fake tensors: a Triton kernel of its own, a value read back from the
device (``.item()``), a tensor made on another device inside ``forward``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode

from autotune import workloads
from autotune.errors import first_line
from autotune.measurement import MFU_METRIC, MODEL_FLOPS_METRIC, TFLOPS_METRIC
from autotune.trial.peaks import dense_peak, peak_precision

__all__ = ["FlopCount", "count_step_flops", "rate_metrics"]

_META = torch.device("meta")


class FlopCount(NamedTuple):
    """FLOPs of one training step (forward and backward), or None and ``reason``, why they were not counted."""

    flops: float | None
    reason: str | None = None


def count_step_flops(workload: workloads.Workload, batch: Any) -> FlopCount:
    """The FLOPs of ``loss_fn(model(inputs), targets)`` and its backward pass on ``batch``, ``(inputs, targets)`` as
    the reference pass checks (see the module docstring); a step of the workload's own (``train_step``) is not
    counted."""
    if workload.train_step is not None or workload.loss_fn is None:
        return FlopCount(None, "the workload's own train_step is not counted")
    try:
        return FlopCount(float(_count(workload.model, workload.loss_fn, batch)))
    except Exception as exc:  # the model cannot run on fake tensors: no count, the trial goes on
        return FlopCount(None, f"{type(exc).__name__}: {first_line(exc)}")


def rate_metrics(
    count: FlopCount,
    step_ms: float,
    gpu: str | None,
    precision: str,
    tf32_matmuls: bool = False,
    float8: str = "none",
) -> dict[str, Any]:
    """A trial's metrics of its FLOPs at ``step_ms`` a step: ``model_flops_per_step`` and ``tflops`` (achieved
    TFLOP/s), with ``mfu``, ``peak_tflops`` and ``peak_precision`` where ``gpu`` (None on a CPU) has a dense peak in
    the precision the step's matmuls ran in (:func:`autotune.trial.peaks.peak_precision` of the ``precision``,
    ``tf32_matmuls`` and ``float8`` knobs); ``flops_not_counted`` (why) when there is no count."""
    if count.flops is None:
        return {"flops_not_counted": count.reason}
    tflops = count.flops / (step_ms / 1e3) / 1e12
    metrics: dict[str, Any] = {MODEL_FLOPS_METRIC: count.flops, TFLOPS_METRIC: tflops}
    ran_in = peak_precision(precision, tf32_matmuls, float8)
    peak = dense_peak(gpu, ran_in) if gpu is not None else None
    if peak:
        metrics |= {MFU_METRIC: tflops / peak, "peak_tflops": peak, "peak_precision": ran_in}
    return metrics


def _count(model: torch.nn.Module, loss_fn: Callable[[Any, torch.Tensor], torch.Tensor], batch: Any) -> int:
    fake = FakeTensorMode(allow_non_fake_inputs=True)  # a tensor the forward pass holds outside its state: faked too
    step = _Step(model, loss_fn)
    state = {f"model.{name}": tensor for name, tensor in _fake_state(model, fake).items()}
    fake_inputs, fake_targets = _fake(batch, fake)  # (inputs, targets): the reference pass has checked it is a pair
    with fake, FlopCounterMode(display=False) as counter, torch.enable_grad():
        loss = torch.func.functional_call(step, state, (fake_inputs, fake_targets), tie_weights=True, strict=False)
        loss.backward()
    return int(counter.get_total_flops())


class _Step(torch.nn.Module):
    """The model and its loss as one module, swapped together: a loss that reads the model's parameters itself (a
    fused LM head takes ``model.head.weight``) reads the fake ones too."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable[[Any, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, inputs: Any, targets: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(self.model(inputs), targets)


def _fake_state(model: torch.nn.Module, fake: FakeTensorMode) -> dict[str, torch.Tensor]:
    """Every parameter and buffer of ``model`` by name, as a fake meta tensor (a tied tensor: one fake for all its
    names); parameters keep ``requires_grad``, so the backward pass is the real one's."""
    named = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    made: dict[int, torch.Tensor] = {}
    state = {}
    for name, tensor in named:
        if id(tensor) not in made:
            made[id(tensor)] = _fake(tensor, fake).requires_grad_(tensor.requires_grad)
        state[name] = made[id(tensor)]
    return state


def _fake(value: Any, fake: FakeTensorMode) -> Any:
    """``value`` with each tensor in it (in tuples, lists, dicts) a fake tensor on ``meta``: its shape, no data."""
    if isinstance(value, torch.Tensor):
        return fake.from_tensor(value.detach().to(_META))
    if isinstance(value, tuple | list):
        return type(value)(_fake(item, fake) for item in value)
    if isinstance(value, dict):
        return {key: _fake(item, fake) for key, item in value.items()}
    return value
