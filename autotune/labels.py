"""Short labels of trials and sweeps, for progress lines and MLflow's run list; nothing here is read back.

Import-light on purpose (no MLflow): a sweep without tracking labels its trials too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["sweep_run_name", "trial_run_name"]

_MAX_RUN_NAME_LEN = 60

# Display only: knob defaults (autotune.knobs.Knobs) that a run name leaves out, and short names.
_NAME_DEFAULTS: dict[str, Any] = {"matmul_precision": "auto", "fused_optimizer": False, "compile_scope": "model"}
_SHORT_KEYS = {
    "cudnn_benchmark": "bench",
    "cudnn_deterministic": "det",
    "fused_optimizer": "fused",
    "matmul_precision": "mm",
}


def sweep_run_name(study_name: str) -> str:
    """The parent run's name, e.g. ``sweep resnet50``."""
    return f"sweep {study_name}"


def trial_run_name(number: int, params: Mapping[str, Any]) -> str:
    """A short run name for the MLflow run list, e.g. ``t012 bf16 cl compile=default bs256``
    (``compile=default/blocks`` for ``compile_scope=blocks``).

    Default knob values are left out; other parameters show as ``key=value``. At most 60 characters.
    """
    rest = dict(params)
    parts = [f"t{number:03d}", *_knob_parts(rest)]
    parts.extend(
        f"{_SHORT_KEYS.get(key, key)}={_short_value(value)}"
        for key, value in rest.items()
        if value is not None and not _is_name_default(key, value)
    )
    text = " ".join(parts)
    return text if len(text) <= _MAX_RUN_NAME_LEN else text[: _MAX_RUN_NAME_LEN - 3] + "..."


def _knob_parts(rest: dict[str, Any]) -> list[str]:
    """Abbreviations of the main knobs, in a fixed order; pops them from ``rest``."""
    parts: list[str] = []
    precision = rest.pop("precision", None)
    if precision not in (None, "default"):
        parts.append(str(precision))
    memory_format = rest.pop("memory_format", None)
    if memory_format == "channels_last":
        parts.append("cl")
    elif memory_format not in (None, "contiguous"):
        parts.append(f"mf={memory_format}")
    compile_mode = rest.pop("compile_mode", None)
    if compile_mode not in (None, "none"):
        blocks = rest.get("compile_scope") == "blocks"
        if blocks:
            del rest["compile_scope"]  # said with the mode: compile=default/blocks
        parts.append(f"compile={compile_mode}" + ("/blocks" if blocks else ""))
    batch_size = rest.pop("batch_size", None)
    if batch_size is not None:
        parts.append(f"bs{batch_size}")
    return parts


def _is_name_default(key: str, value: Any) -> bool:
    return key in _NAME_DEFAULTS and value == _NAME_DEFAULTS[key]


def _short_value(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
