"""The tuned-config file: what ``autotune export`` writes and production training applies.

Production code needs two lines::

    cfg = autotune.load("tuned.yaml")
    model, step_ctx = cfg.apply(model, optimizer)

:meth:`TunedConfig.apply` calls :func:`autotune.knobs.apply`, the very code every trial ran, so
what was measured is what ships. The batch size is the one knob ``apply`` cannot set (the data
loader owns it): read it from :attr:`TunedConfig.batch_size`, or let :meth:`TunedConfig.dataloader`
build the tuned ``DataLoader``. Triton block sizes are looked up per kernel and shape with
:meth:`TunedConfig.kernel_config`.

The file is YAML::

    schema_version: 1
    workload: {name: resnet50, preset: full}
    knobs: {batch_size: 256, precision: bf16, memory_format: channels_last, ...,
            inductor: {coordinate_descent_tuning: true}}   # a finalist's Inductor options, if it won
    params: {}                  # the workload's own tuned parameters
    kernels: {}                 # listed Triton kernels: {"pkg.mod:kernel": {kwargs, num_warps, num_stages,
                                #   shape_keys}}; the matmul workload: {kernel: {"MxNxK:dtype": {BLOCK_M: ...}}}
    provenance: {study: ..., storage: ..., trial: 17, metrics: {...}, env: {...}, ...}

Loading a file measured on another GPU or software stack warns (:class:`EnvMismatchWarning`):
the configuration still runs, but its numbers may not hold there.

A compiled winner ships its compile beside the file (``tuned.compile-artifacts.bin``, section
``compile_artifacts``: file, sha256, the env that wrote it): :mod:`autotune.shipartifacts` writes it,
:meth:`TunedConfig.apply` loads it before compiling (:mod:`autotune.compileartifacts`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import optuna
import torch
import yaml

from autotune import compileartifacts
from autotune import knobs as knobs_mod  # `knobs` is also a TunedConfig field
from autotune.atomicfile import write_atomically as _write_atomically
from autotune.errors import AutotuneError
from autotune.records import StudyInfo, StudyRecords, TrialRecord
from autotune.results import TrialResult
from autotune.shipartifacts import Shipping, ship
from autotune.storage.studies import redact_url
from autotune.tuned import SCHEMA_VERSION, TunedConfig, shape_key

__all__ = [
    "SCHEMA_VERSION",
    "EnvMismatchWarning",
    "Shipping",
    "TunedConfig",
    "current_env",
    "export",
    "load",
]

_SECTIONS = ("schema_version", "workload", "knobs", "params", "kernels", "provenance", compileartifacts.SECTION)
# A kernel configuration's keys, as autotune.kernels.matmul.CONFIG_KEYS names them; GROUP_M may be
# absent (replayed records leave it out) and then takes the kernel's default, as does the variant.
_KERNEL_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "GROUP_M")
_KERNEL_DEFAULTS = {"GROUP_M": 8, "dtype": "bf16", "kernel": "tiled"}
_ENV_KEYS = ("gpu", "torch", "cuda", "triton")


class EnvMismatchWarning(UserWarning):
    """The tuned config was measured on another GPU or software stack than this machine's."""


# --- export ------------------------------------------------------------------------------------


def _is_kernel_workload(info: StudyInfo, result: TrialResult) -> bool:
    return "tflops" in result.metrics or "triton_matmul" in info.workload


def _kernels(info: StudyInfo, result: TrialResult) -> dict[str, dict[str, dict[str, Any]]]:
    """Block sizes keyed by kernel and shape, for the built-in Triton matmul; {} for training workloads."""
    params = {**_KERNEL_DEFAULTS, **result.params}
    if not _is_kernel_workload(info, result) or not all(k in params for k in _KERNEL_KEYS):
        return {}
    # Imported here: it imports Triton, which a training workload's export does not need.
    from autotune.workloads.triton_matmul import SHAPES

    if all(k in params for k in ("M", "N", "K")):  # a shape from the space's args or params
        M, N, K = (int(params[k]) for k in ("M", "N", "K"))
    elif info.preset in SHAPES:
        M, N, K = SHAPES[info.preset]
    else:
        return {}
    config: dict[str, Any] = {key: int(params[key]) for key in _KERNEL_KEYS}
    config["kernel"] = str(params["kernel"])  # the variant: tiled or tma_persistent
    return {"triton_matmul": {shape_key(M, N, K, str(params["dtype"])): config}}


def _listed_kernels(result: TrialResult) -> dict[str, Any]:
    """The space's listed Triton kernels: import path -> the config the trial pinned, and the shape keys it ran on."""
    keep = ("kwargs", "num_warps", "num_stages", "shape_keys")
    return {path: {key: pinned[key] for key in keep if key in pinned} for path, pinned in result.kernels.items()}


def _trial_metrics(records: StudyRecords, record: TrialRecord) -> dict[str, Any]:
    """The numbers a reader of the file wants, as the record model ranks them: the objectives (the re-measured
    medians where there are some), memory, speedup over the default, the first measurement, the re-measurements."""
    ranked = record.metrics
    wanted = [m for m, _ in records.objectives] + ["throughput_unit", "peak_mem_gib", "step_ms_p50", "compile_s"]
    metrics: dict[str, Any] = {m: ranked[m] for m in wanted if m in ranked}
    metrics["value_is"] = record.value_is
    if (speedup := records.speedup(record)) is not None:
        metrics["speedup_vs_default"] = round(speedup, 4)
    if record.remeasured is not None:
        first = record.first_metrics
        metrics["first_measurement"] = {m: first[m] for m, _ in records.objectives if m in first}
        metrics["remeasured"] = record.remeasured.to_dict()
    return metrics


def _provenance(records: StudyRecords, record: TrialRecord, storage: str) -> dict[str, Any]:
    assert record.result is not None  # a chosen trial is a measured one
    provenance: dict[str, Any] = {
        "study": records.study.study_name,
        "storage": redact_url(storage) if storage else None,
        "trial": record.number,
        "objectives": [{"metric": m, "direction": d} for m, d in records.objectives],
        "metrics": _trial_metrics(records, record),
        "env": dict(record.result.env),
        "trial_params": record.params,  # what `autotune verify` re-runs
        "default": _default_trial(records),
        "mlflow_run_id": record.mlflow_run_id,
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "autotune_version": importlib.metadata.version("autotune"),
    }
    return {k: v for k, v in provenance.items() if v is not None}


def _default_trial(records: StudyRecords) -> dict[str, Any] | None:
    """The PyTorch-default trial the speedup is measured against: its number, params and ranked figure."""
    default = records.default
    if default is None or not default.ok:
        return None
    return {"trial": default.number, "params": default.params, "value": default.value}


def _workload(info: StudyInfo) -> dict[str, Any]:
    """Name, preset and the space's fixed workload args (``data: host`` ...): what the trials built."""
    workload: dict[str, Any] = {"name": info.workload, "preset": info.preset}
    try:
        args = dict(info.space().workload.args)
    except AutotuneError:  # a space text that no longer loads (a renamed module): the file still exports
        args = {}
    return {**workload, "args": args} if args else workload


def _config(records: StudyRecords, info: StudyInfo, record: TrialRecord, storage: str) -> TunedConfig:
    result = record.result
    assert result is not None  # a chosen trial is a measured one
    # result.params are the resolved params the trial ran with (all knobs, the batch size it used).
    resolved = {k: v for k, v in result.params.items() if v is not None}
    tuned_knobs = {k: resolved[k] for k in knobs_mod.KNOB_SPECS if k in resolved}  # in the knobs' own order
    knobs = knobs_mod.Knobs.from_params(tuned_knobs)  # refuse to write what load() would reject
    if knobs.inductor_options:
        tuned_knobs["inductor"] = knobs.inductor_options  # a mapping in the file; load() reads either form
    kernel_params = {name for pinned in result.kernels.values() for name in pinned.get("params", [])}
    return TunedConfig(
        knobs=tuned_knobs,
        params={k: v for k, v in resolved.items() if k not in knobs_mod.KNOB_SPECS and k not in kernel_params},
        workload=_workload(info),
        kernels={**_kernels(info, result), **_listed_kernels(result)},
        provenance=_provenance(records, record, storage),
    )


def _headline(provenance: dict[str, Any]) -> str:
    """``: throughput 6,847 images/s (3.25x PyTorch defaults)`` for the file's first comment lines."""
    metrics = provenance.get("metrics", {})
    metric = provenance["objectives"][0]["metric"]
    value = metrics.get(metric)  # the ranked figure: the re-measured median where there is one
    if not isinstance(value, int | float):
        return ""
    number = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    unit = f" {metrics['throughput_unit']}" if metric == "throughput" and "throughput_unit" in metrics else ""
    speedup = f" ({metrics['speedup_vs_default']:.2f}x PyTorch defaults)" if "speedup_vs_default" in metrics else ""
    return f": {metric} {number}{unit}{speedup}"


def _header(config: TunedConfig, path: Path) -> str:
    prov = config.provenance
    device = prov.get("env", {}).get("gpu") or prov.get("env", {}).get("cpu") or "?"
    return (
        f"# autotune tuned config for {config.workload.get('name')} ({config.workload.get('preset')}),"
        f" measured on {device}.\n"
        f"# Study {prov.get('study')!r}, trial {prov.get('trial')}{_headline(prov)}; written by `autotune export`.\n"
        "# Apply it in production training (the same code the trials ran):\n"
        "#\n"
        f'#   cfg = autotune.load("{path.name}")\n'
        "#   model, step_ctx = cfg.apply(model, optimizer)\n"
        "#\n"
        "# then train with step_ctx.autocast() / step_ctx.backward(loss) / step_ctx.step(optimizer),\n"
        "# and feed batches of cfg.batch_size. Re-tune when the GPU or the torch version changes.\n"
        + _artifacts_header(config)
    )


def _artifacts_header(config: TunedConfig) -> str:
    if not config.compile_artifacts:
        return ""
    return (
        f"# apply() loads the winner's compile ({config.compile_artifacts['file']}, beside this file; checked"
        " against its\n# sha256 below) before the model compiles, where torch, Triton and the device are the ones"
        " that wrote it.\n"
    )


def export(
    study: optuna.Study,
    info: StudyInfo,
    path: str | os.PathLike[str],
    *,
    rule: str | None = None,
    storage: str = "",
    records: StudyRecords | None = None,
    artifacts: Shipping | None = Shipping(),  # noqa: B008 (frozen: one shared default is safe)
) -> TunedConfig:
    """Write the chosen trial (the winner, or the best satisfying ``rule``) to ``path`` as YAML.

    ``storage`` is the study's storage URL, recorded in the provenance without its password; ``records``
    the study's records when the caller has them (else they are read). A compiled trial's compile artifacts
    are written beside ``path`` as ``artifacts`` says (:mod:`autotune.shipartifacts`; None: not shipped).
    Raises :class:`AutotuneError` when no trial qualifies, or when the trial's artifacts file was changed.
    """
    records = records if records is not None else StudyRecords.read(study, info)
    record = records.choose(rule)
    config = _config(records, info, record, storage)
    if rule is not None:
        config.provenance["rule"] = rule
    target = Path(path)
    if artifacts is not None:  # written before the file that names them
        shipped = ship(record, info, records.study.study_name, storage, target, artifacts)
        config.compile_artifacts = shipped.to_dict() if shipped is not None else {}
    body = yaml.safe_dump(config.to_dict(), sort_keys=False, default_flow_style=False)
    _write_atomically(target, _header(config, target) + body)
    return config


# --- load --------------------------------------------------------------------------------------


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
    unknown = sorted(str(k) for k in data if k not in _SECTIONS)
    if unknown:
        raise AutotuneError(
            f"tuned config {path}: unknown section(s) {', '.join(unknown)} (known: {', '.join(_SECTIONS)})"
        )
    for section in _SECTIONS[1:]:
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
        stacklevel=_outside_autotune(),
    )
    return skipped


def _outside_autotune() -> int:
    """The stacklevel of the first caller outside this package, so the warning names the user's line."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "autotune":
        frame, level = frame.f_back, level + 1
    return level
