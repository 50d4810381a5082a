"""What the informed start asks in a trial process: the device's facts and the workload's own first choices.

Run through :meth:`autotune.trial_process.TrialRunner.call` (a child of the trial server, which has torch imported), so
the sweep's process never touches CUDA or runs the workload's code; only plain data comes back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from autotune import workloads
from autotune.errors import first_line
from autotune.knobs import float8

__all__ = ["STATE_BYTES_PER_PARAM", "WORKLOAD_ATTR", "device_facts", "training_state_gib"]

WORKLOAD_ATTR = "informed_start"  # a build function's {param: value}: what an expert picks on a GPU
# What each parameter holds on the device through a trial's step whatever the batch: its fp32 weight (autocast keeps
# the master weights in fp32), its fp32 gradient and AdamW's two fp32 moments (the trials' optimizer).
STATE_BYTES_PER_PARAM = 16


def training_state_gib(model: torch.nn.Module) -> float:
    """GiB of ``model``'s weights, gradients and AdamW state in a trial: the part of its peak memory that a larger
    batch does not grow (shared parameters counted once)."""
    return sum(p.numel() for p in model.parameters()) * STATE_BYTES_PER_PARAM / 2**30


def _cpu_has_amx() -> bool:
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return False
    return "amx_bf16" in flags.split()


def _host_memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return None


def device_facts(
    workload: str,
    preset: str,
    args: dict[str, Any],
    params: dict[str, Any],
    device_name: str,
    layout: bool,
    float8_searched: bool = False,
) -> dict[str, Any]:
    """In a trial process: the device's facts, the workload's own choices, and what its model, built on the meta
    device with ``params`` (no memory, no weights), says: (``layout``) whether it has 4-D weights; (``float8_searched``,
    on a GPU with FP8 and torchao) the share of its Linear FLOPs float8 would convert; (on a GPU) its weights,
    gradients and optimizer state in GiB (:func:`training_state_gib`). Returns plain data."""
    if device_name == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device_name)
    facts: dict[str, Any] = {"device": device.type, "cpus": len(os.sched_getaffinity(0))}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts |= {"name": props.name, "memory_gib": props.total_memory / 2**30, "bf16": torch.cuda.is_bf16_supported()}
        facts["float8"] = float8.torchao_missing() is None and float8.gpu_lacks_float8(device) is None
    else:
        facts |= {"name": "CPU", "memory_gib": _host_memory_gib(), "bf16": _cpu_has_amx()}
    build = workloads.resolve(workload)
    facts["workload_choices"] = dict(getattr(build, WORKLOAD_ATTR, None) or {})
    share = float8_searched and bool(facts.get("float8"))
    gpu = device.type == "cuda"
    if layout or share or gpu:
        try:
            accepted = workloads.workload_params(build)
            own = {name: value for name, value in params.items() if name in accepted}
            made = workloads.build(workload, preset, {**args, **own}, torch.device("meta"))
            model = getattr(made, "model", None)
            if layout:
                facts["four_d_weights"] = model is not None and any(p.dim() == 4 for p in model.parameters())
            if share and model is not None:
                facts["float8_share"] = float8.converted_share(model)
            if gpu and isinstance(model, torch.nn.Module):
                facts["state_gib"] = training_state_gib(model)
        except Exception as exc:  # the workload cannot be built on meta: say so where it matters, choose without it
            if layout:
                facts["layout_error"] = f"{type(exc).__name__}: {first_line(exc)}"
    return facts
