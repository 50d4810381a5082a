"""The informed start's configs for the space's listed Triton kernels: what each kernel's own autotuner picks.

A kernel listed in a space (``kernels:``) turns its block sizes and launch settings into searched params, and a
trial pins the kernel to the config its params name. The informed start knows nothing of good block sizes, and
kept the default's, each param's first value (the smallest block): on an H100 the informed start of
``gpt2_kernels.yaml`` measured 479,555 tokens/s where ``gpt2.yaml``'s, its fused head choosing for itself,
measured 496,912 (BENCHMARKS.md). An engineer would let the kernel's autotuner benchmark its configs on the
device first.

So does the sweep, once, before it queues the informed start: one short eager run of the expert's
configuration (compile off, one warm-up and one timed step) in a trial process, its listed kernels unpinned, so
each one the model calls benchmarks its own configs at the model's shapes; the run records what each chose
(:func:`autotune.kernels.choices.autotuned_choices`), and the informed start pins that. Where a kernel chose
differently for several shape keys (the training steps' shapes; the trial's fp32 reference pass runs each
kernel's first config and chooses nothing, :mod:`autotune.kernels.untuned`), the config chosen for the most
keys is taken, the latest on a tie. A kernel the configuration does not call, a run that fails, or a
choice the space does not offer leaves the params as the expert had them, and the note says so. Its time is
the run's (GPT-2's fused head benchmarked its 34 configs in 10-13 s per dtype in an H100's trials); the
informed start then pins the choices and benchmarks nothing, and its trial time counts the run
(``autotune.prepared_s`` on the trial), so the sweep's GPU-time figures include it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from autotune.space import Space
from autotune.space.settings import KernelSpec
from autotune.trial.trialspec import MeasureSettings, TrialSpec
from autotune.trial_process import TrialRunner

__all__ = ["KERNEL_RUN", "KERNEL_RUN_TIMEOUT_S", "autotuned_kernel_params", "eager_params"]

KERNEL_RUN = MeasureSettings(min_warmup_steps=1, max_warmup_steps=1, min_steps=1, min_time_s=0.0)
KERNEL_RUN_TIMEOUT_S = 600.0  # a model's build and two steps, with every listed kernel benchmarking its configs


def eager_params(space: Space, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with ``torch.compile`` off, and without the params that only apply when it is on (``when:``)."""
    eager = {**params, "compile_mode": "none"} if "compile_mode" in params else dict(params)
    return {
        name: value for name, value in eager.items() if name not in space.params or space.params[name].is_active(eager)
    }


def autotuned_kernel_params(
    space: Space, params: Mapping[str, Any], device: str, cache_dir: str | None, memory_cap_gib: float | None = None
) -> tuple[dict[str, Any], str]:
    """The listed kernels' params as their own autotuners chose them in an eager run of ``params``, and a note on
    what was found (empty when the space lists no kernel)."""
    if not space.kernels:
        return {}, ""
    kernel_params = {name for kernel in space.kernels for name in kernel.params}
    spec = TrialSpec(
        space.workload.name,
        {name: value for name, value in eager_params(space, params).items() if name not in kernel_params},
        space.workload.preset,
        device,
        dict(space.workload.args),
        KERNEL_RUN,
        memory_cap_gib,
        kernels=(),  # unpinned: each kernel benchmarks its own configs
        compile_cache_dir=cache_dir,
    )
    result = TrialRunner().run(spec, KERNEL_RUN_TIMEOUT_S)
    if not result.ok:
        reason = (result.reason or result.status.value).splitlines()[0]
        return {}, f"the listed kernels kept their first configs: their autotuning run ended {result.status}: {reason}"
    chosen: dict[str, Any] = {}
    said: list[str] = []
    for kernel in space.kernels:
        by_shape = (result.kernels.get(kernel.path) or {}).get("by_shape") or []
        values = _offered(space, _as_params(kernel, _most_chosen(by_shape))) if by_shape else {}
        chosen |= values
        said.append(f"{kernel.alias}: {_label(kernel, values) if values else 'not called, first config kept'}")
    return chosen, "the listed kernels as their own autotuners chose: " + "; ".join(said)


def _most_chosen(by_shape: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The choice made for the most shape keys; the latest of those on a tie (the training steps come last)."""
    counts = Counter(choice["config"] for choice in by_shape)
    top = max(counts.values())
    return next(choice for choice in reversed(by_shape) if counts[choice["config"]] == top)


def _as_params(kernel: KernelSpec, choice: Mapping[str, Any]) -> dict[str, Any]:
    """A kernel's choice as its search params: ``alias.NAME`` values for a declared kernel, else its config label."""
    if kernel.params == (kernel.alias,):
        return {kernel.alias: choice["config"]}
    settings = {**choice["kwargs"], "num_warps": choice["num_warps"], "num_stages": choice["num_stages"]}
    prefix = f"{kernel.alias}."
    return {
        name: settings[name.removeprefix(prefix)] for name in kernel.params if name.removeprefix(prefix) in settings
    }


def _offered(space: Space, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` if the space offers every one of them, else none (a partial config is no kernel's choice)."""
    offered = all(name in space.params and space.params[name].contains(value) for name, value in values.items())
    return dict(values) if offered else {}


def _label(kernel: KernelSpec, values: Mapping[str, Any]) -> str:
    """``BLOCK_V=16384 num_warps=16``: a declared kernel's values by their own names, else its config label."""
    if kernel.alias in values:
        return str(values[kernel.alias])
    return " ".join(f"{name.removeprefix(kernel.alias + '.')}={value}" for name, value in values.items())
