"""How a trial failed: an exception raised by a trial job, mapped to its status and a one-line reason."""

from __future__ import annotations

import torch

from autotune.errors import AutotuneError, NumericsError, first_line
from autotune.knobs.attention import cannot_run, refusals
from autotune.measurement import Status

__all__ = ["classify"]

_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory", "out of resource")
_COMPILE_MODULES = ("torch._dynamo", "torch._inductor", "triton.compiler", "triton.runtime")


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError | MemoryError) or type(exc).__name__ == "OutOfResources":
        return True
    return isinstance(exc, RuntimeError) and any(text in str(exc).lower() for text in _OOM_TEXT)


def _cannot_run(exc: BaseException) -> bool:
    """A configuration this device cannot run (an attention kernel pinned for shapes it does not take), raised as a
    RuntimeError by PyTorch, also through the compiler's tracing: invalid, not a crash."""
    return isinstance(exc, RuntimeError) and cannot_run(str(exc))


def classify(exc: BaseException) -> tuple[Status, str]:
    """Map an exception raised by a trial to its status and a one-line reason."""
    chain = _chain(exc)
    message = first_line(exc)
    reason = f"{type(exc).__name__}: {message}"
    if any(_is_oom(e) for e in chain):  # also when compilation wraps an OOM during autotuning
        oom = next(e for e in chain if _is_oom(e))
        return Status.OOM, f"{type(oom).__name__}: {first_line(oom)}"
    if isinstance(exc, AutotuneError):
        return Status.INVALID, message
    if isinstance(exc, NumericsError):
        return Status.NUMERICS, message
    if cannot_run := [e for e in chain if _cannot_run(e)]:
        cause = cannot_run[-1]  # the innermost: the compiler's wrapper says only that tracing failed
        why = "; ".join(refusals())  # PyTorch's reasons, warned before it raised (knobs.attention.keep_refusals)
        return Status.INVALID, f"{type(cause).__name__}: {first_line(cause)}" + (f" ({why})" if why else "")
    if any(type(e).__module__.startswith(_COMPILE_MODULES) for e in chain):
        return Status.COMPILE_ERROR, reason
    return Status.CRASH, reason
