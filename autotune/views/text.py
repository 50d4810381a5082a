"""Human-readable text for a trial: its params, how far its step was from the GPU's limit, and what `autotune trial`
prints without --json; and the warning of a study's listed kernel that no trial launched."""

from __future__ import annotations

from typing import Any

from autotune.measurement import MFU_METRIC, MODEL_FLOPS_METRIC, TFLOPS_METRIC, TrialResult
from autotune.numbers import flops_text, number, quantity

__all__ = ["format_params", "trial_summary"]


def format_params(params: dict[str, Any]) -> str:
    """``key=value`` pairs, leaving out knobs left at PyTorch's own default (None)."""
    return " ".join(f"{key}={value}" for key, value in params.items() if value is not None)


def _flops_line(metrics: dict[str, Any]) -> str | None:
    """The model FLOPs of a step, the TFLOP/s and MFU they make, against which peak; or why they were not counted."""
    if (missing := metrics.get("flops_not_counted")) is not None:
        return f"model FLOPs not counted: {missing}"
    flops = metrics.get(MODEL_FLOPS_METRIC)
    if flops is None:
        return None
    text = flops_text(metrics.get(TFLOPS_METRIC), metrics.get(MFU_METRIC))
    peak = metrics.get("peak_tflops")
    against = f" of {quantity(peak, 'TFLOP/s')} dense {metrics.get('peak_precision')}" if peak is not None else ""
    return f"{text}{against}  ({number(flops / 1e12)} TFLOP a step)"


def _energy_line(metrics: dict[str, Any]) -> str | None:
    if "energy_j_per_sample" not in metrics:
        return None
    return (
        f"{quantity(metrics['energy_j_per_sample'], 'J/sample')}  (power {metrics.get('power_w_mean', 0):.0f} W, "
        f"GPU util {metrics.get('gpu_util_mean', 0):.0f}%)"
    )


def _env_line(env: dict[str, Any]) -> str:
    device = env.get("gpu") or env.get("cpu") or env.get("device", "?")
    parts = [str(device), f"torch {env.get('torch', '?')}"]
    parts += [f"{key} {env[key]}" for key in ("cuda", "cudnn", "triton", "driver") if env.get(key)]
    return ", ".join(parts)


def _data_wait_line(result: TrialResult) -> str | None:
    metrics = result.metrics
    if "data_wait_frac" not in metrics:  # batches made on the device: nothing to wait for
        return None
    bound = "  input-bound" if result.input_bound else ""
    return f"p50 {metrics['data_wait_ms_p50']:.2f} ms per step, {metrics['data_wait_frac']:.1%} of the step{bound}"


def _blocks_part(metrics: dict[str, Any]) -> str:
    """``, blocks: 12 x Block (blocks.0 .. blocks.11, found)`` for a trial that compiled its blocks one by one."""
    return f", blocks: {metrics['compiled_block']}" if metrics.get("compiled_block") else ""


def _short(value: Any) -> str:
    return number(value) if isinstance(value, float) else str(value)


def _ranks_line(metrics: dict[str, Any]) -> str | None:
    """A data-parallel trial's ranks: how many, and the slowest, whose step the throughput was taken at."""
    if "world_size" not in metrics:
        return None
    slowest = f"rank {int(metrics['slowest_rank'])} at {metrics['slowest_rank_step_ms']:.2f} ms a step"
    return f"{int(metrics['world_size'])}, together (slowest {slowest})"


def trial_summary(workload: str, preset: str, result: TrialResult) -> str:
    """A few aligned lines: status, params, throughput, step times, memory, cost, environment."""
    head = f"{workload} ({preset}): {result.status.value}"
    if not result.ok:
        params = format_params(result.params)
        return f"{head}: {result.reason}" + (f"\n  params       {params}" if params else "")
    m = result.metrics
    if "step_ms_p50" not in m:  # a kernel workload: its own timing, no training step
        return "\n".join(
            [head, *(f"  {k:<16} {_short(v)}" for k, v in m.items()), f"  {'env':<16} {_env_line(result.env)}"]
        )
    rows: list[tuple[str, str | None]] = [
        ("params", format_params(result.params)),
        ("throughput", quantity(m["throughput"], m["throughput_unit"])),
        ("ranks", _ranks_line(m)),
        ("step time", f"p50 {m['step_ms_p50']:.2f} ms  p90 {m['step_ms_p90']:.2f} ms  CV {m['step_cv']:.2%}"),
        ("data wait", _data_wait_line(result)),
        ("peak memory", f"{m['peak_mem_gib']:.2f} GiB"),
        ("compile", f"{m['compile_s']:.1f} s  (first step {m['first_step_s']:.1f} s){_blocks_part(m)}"),
        ("FLOPs", _flops_line(m)),
        ("energy", _energy_line(m)),
        ("overhead", f"{m['overhead_s']:.2f} s  (start {m['startup_s']:.2f} s, build {m['setup_s']:.2f} s)"),
        ("no-op knobs", m.get("noop_knobs")),
        ("WARNING", "other processes used the GPU during timing" if m.get("gpu_other_processes") else None),
        ("env", _env_line(result.env)),
    ]
    return "\n".join([head, *(f"  {label:<12} {text}" for label, text in rows if text)])
