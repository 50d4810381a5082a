"""The tuned-config file, read: :func:`load` checks it and returns a :class:`~autotune.tuned.config.TunedConfig`.

Production code needs two lines::

    cfg = autotune.load("tuned.yaml")
    model, step_ctx = cfg.apply(model, optimizer)

The file is YAML (:mod:`autotune.views.export` writes it)::

    schema_version: 1
    workload: {name: resnet50, preset: full}
    knobs: {batch_size: 256, precision: bf16, memory_format: channels_last, ...,
            inductor: {coordinate_descent_tuning: true}}   # a finalist's Inductor options, if it won
    params: {}                  # the workload's own tuned parameters
    kernels: {}                 # listed Triton kernels: {"pkg.mod:kernel": {kwargs, num_warps, num_stages,
                                #   shape_keys}}; the matmul workload: {kernel: {"MxNxK:dtype": {BLOCK_M: ...}}}
    provenance: {study: ..., storage: ..., trial: 17, metrics: {...}, env: {...}, ...}
    compile_artifacts: {file: tuned.compile-artifacts.bin, sha256: ..., env: {...}}   # a compiled winner only

Loading a file measured on another GPU or software stack warns (:class:`EnvMismatchWarning`):
the configuration still runs, but its numbers may not hold there.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import yaml

from autotune.errors import AutotuneError
from autotune.tuned import artifacts as compileartifacts
from autotune.tuned.config import SCHEMA_VERSION, TunedConfig, user_stacklevel

__all__ = ["SECTIONS", "EnvMismatchWarning", "current_env", "env_differences", "load"]

SECTIONS = ("schema_version", "workload", "knobs", "params", "kernels", "provenance", compileartifacts.SECTION)
_ENV_KEYS = ("gpu", "torch", "cuda", "triton")


class EnvMismatchWarning(UserWarning):
    """The tuned config was measured on another GPU or software stack than this machine's."""


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise AutotuneError(f"tuned config {path}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AutotuneError(f"tuned config {path}: cannot read it ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise AutotuneError(f"tuned config {path}: not valid YAML ({problem}{where})") from None
    if not isinstance(data, dict):
        raise AutotuneError(f"tuned config {path}: expected a mapping, got {type(data).__name__}")
    return data


def _check_shape(path: Path, data: dict[str, Any]) -> None:
    """Schema version first (a newer file may have other sections), then the sections themselves."""
    version = data.get("schema_version")
    if version is None:
        raise AutotuneError(f"tuned config {path}: no schema_version (this autotune reads {SCHEMA_VERSION})")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise AutotuneError(
            f"tuned config {path}: schema_version {version!r} is not supported"
            f" (this autotune reads {SCHEMA_VERSION}; re-export with this version)"
        )
    unknown = sorted(str(k) for k in data if k not in SECTIONS)
    if unknown:
        raise AutotuneError(
            f"tuned config {path}: unknown section(s) {', '.join(unknown)} (known: {', '.join(SECTIONS)})"
        )
    for section in SECTIONS[1:]:
        if not isinstance(data.get(section) or {}, dict):
            raise AutotuneError(f"tuned config {path}: {section} must be a mapping, got {type(data[section]).__name__}")


def load(path: str | os.PathLike[str]) -> TunedConfig:
    """Read a tuned config; bad input raises a one-line :class:`AutotuneError`.

    Warns (:class:`EnvMismatchWarning`) when the file was measured on another GPU, torch, CUDA or
    Triton version than this machine has.
    """
    target = Path(path)
    data = _read(target)
    _check_shape(target, data)
    config = TunedConfig(
        knobs=dict(data.get("knobs") or {}),
        params=dict(data.get("params") or {}),
        workload=dict(data.get("workload") or {}),
        kernels=dict(data.get("kernels") or {}),
        provenance=dict(data.get("provenance") or {}),
        schema_version=SCHEMA_VERSION,
        compile_artifacts=dict(data.get(compileartifacts.SECTION) or {}),
        source=target,
    )
    try:
        knobs = config.to_knobs()
        artifacts = _artifacts(config) if knobs.compile_mode != "none" else None
    except AutotuneError as exc:
        raise AutotuneError(f"tuned config {target}: {exc}") from None
    config.artifacts_warned = _warn_on_env_mismatch(target, config.provenance.get("env") or {}, artifacts)
    return config


def _artifacts(config: TunedConfig) -> compileartifacts.Artifacts | None:
    """The file's compile artifacts section, checked (AutotuneError names the bad key); None without one."""
    if not config.compile_artifacts:
        return None
    return compileartifacts.Artifacts.from_dict(config.compile_artifacts, compileartifacts.SECTION)


def current_env() -> dict[str, str | None]:
    """This machine's GPU, torch, CUDA and Triton versions (cheap: Triton is not imported)."""
    triton_version = None
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        triton_version = importlib.metadata.version("triton")
    return {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": str(torch.__version__),  # a TorchVersion: a str subclass YAML will not write
        "cuda": torch.version.cuda,
        "triton": triton_version,
    }


def _describe(key: str, value: Any, *, absent_gpu: str) -> str:
    if key == "gpu":
        return str(value) if value else absent_gpu
    return f"{'CUDA' if key == 'cuda' else key} {value}"


def _comparable(key: str, value: Any) -> Any:
    """Versions compared without their local part: torch 2.11.0+cu130 is torch 2.11.0 (CUDA is its own key)."""
    if key in ("torch", "triton") and isinstance(value, str):
        return value.split("+", 1)[0]
    return value or None


def env_differences(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The env keys (gpu, torch, cuda, triton) on which ``now`` differs from ``recorded``.

    A GPU (or its absence) always counts; versions only when both sides know theirs, and without
    their local part (torch 2.11.0+cu130 is torch 2.11.0: CUDA is its own key).
    """
    return [
        key
        for key in _ENV_KEYS
        if (key == "gpu" or (recorded.get(key) and now.get(key)))
        and _comparable(key, recorded.get(key)) != _comparable(key, now.get(key))
    ]


def _warn_on_env_mismatch(path: Path, recorded: dict[str, Any], artifacts: compileartifacts.Artifacts | None) -> bool:
    """Warn, in one line, when this machine is not the one that measured the file; True when that line also said
    that its compile ``artifacts`` will not load here (so ``apply()`` says nothing more)."""
    if not recorded:
        return False  # a hand-written file: nothing to compare with
    now = current_env()
    differ = env_differences(recorded, now)
    if not differ:
        return False
    then = " / ".join(_describe(k, recorded.get(k), absent_gpu="a CPU") for k in differ)
    here = " / ".join(_describe(k, now[k], absent_gpu="no GPU") for k in differ)
    device = "cuda" if now.get("gpu") else "cpu"
    skipped = artifacts is not None and bool(
        compileartifacts.differences(artifacts.env, compileartifacts.environment(device))
    )
    also = "; its compile artifacts will not load here (the model compiles from scratch)" if skipped else ""
    warnings.warn(
        f"{path.name} was measured on {then}; this machine has {here}: re-tune for numbers that hold{also}",
        EnvMismatchWarning,
        stacklevel=user_stacklevel(),
    )
    return skipped
