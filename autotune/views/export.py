"""``autotune export``: the study's winner, written as the tuned-config file production applies.

The file's format and how it is read are :mod:`autotune.tuned.file`'s; this module renders a study's
records into it. :meth:`~autotune.tuned.config.TunedConfig.apply` calls :func:`autotune.knobs.apply`,
the very code every trial ran, so what was measured is what ships. A compiled winner ships its compile
beside the file (``tuned.compile-artifacts.bin``): :mod:`autotune.views.shipping` writes it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
import yaml

import autotune
from autotune.atomicfile import write_atomically as _write_atomically
from autotune.errors import AutotuneError
from autotune.knobs.registry import KNOB_SPECS, Knobs
from autotune.measurement import TrialResult
from autotune.numbers import number
from autotune.records import StudyInfo, StudyRecords, TrialRecord
from autotune.storage.studies import redact_url
from autotune.tuned.config import TunedConfig, shape_key
from autotune.views.shipping import Shipping, ship

__all__ = ["Shipping", "export"]

# A kernel configuration's keys, as autotune.kernels.matmul.CONFIG_KEYS names them; GROUP_M may be
# absent (replayed records leave it out) and then takes the kernel's default, as does the variant.
_KERNEL_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "GROUP_M")
_KERNEL_DEFAULTS = {"GROUP_M": 8, "dtype": "bf16", "kernel": "tiled"}


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
    """The trial's Triton kernels: import path -> the config the trial pinned and the shape keys it ran on (a
    listed kernel), or what the kernel's own autotuner chose per shape key (``chosen_by: autotune``)."""
    keep = ("kwargs", "num_warps", "num_stages", "shape_keys", "chosen_by", "by_shape")
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
        "autotune_version": autotune.__version__,  # also when run from a source tree (no package metadata)
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
    tuned_knobs = {k: resolved[k] for k in KNOB_SPECS if k in resolved}  # in the knobs' own order
    knobs = Knobs.from_params(tuned_knobs)  # refuse to write what load() would reject
    if knobs.inductor_options:
        tuned_knobs["inductor"] = knobs.inductor_options  # a mapping in the file; load() reads either form
    if knobs.float8_filter:
        tuned_knobs["float8_filter"] = knobs.float8_layers.to_mapping()  # the same: {include: [...], exclude: [...]}
    kernel_params = {name for pinned in result.kernels.values() for name in pinned.get("params", [])}
    return TunedConfig(
        knobs=tuned_knobs,
        params={k: v for k, v in resolved.items() if k not in KNOB_SPECS and k not in kernel_params},
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
    unit = f" {metrics['throughput_unit']}" if metric == "throughput" and "throughput_unit" in metrics else ""
    speedup = f" ({metrics['speedup_vs_default']:.2f}x PyTorch defaults)" if "speedup_vs_default" in metrics else ""
    return f": {metric} {number(value)}{unit}{speedup}"


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
    are written beside ``path`` as ``artifacts`` says (:mod:`autotune.views.shipping`; None: not shipped).
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
