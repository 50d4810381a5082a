"""Hand-written tuned-config files for the load and apply tests, with an env that matches this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from autotune.tuned.config import SCHEMA_VERSION
from autotune.tuned.file import current_env

FINALIST_OPTIONS = {"coordinate_descent_tuning": True, "epilogue_fusion": False}


def here_env() -> dict[str, Any]:
    """A provenance env that matches this machine, so loading it does not warn."""
    return {k: v for k, v in current_env().items() if v is not None}


def write_config(path: Path, **changes: Any) -> Path:
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "workload": {"name": "resnet50", "preset": "tiny"},
        "knobs": {"precision": "bf16"},
        "provenance": {"env": here_env()},
    }
    data.update(changes)
    path.write_text(yaml.safe_dump(data))
    return path
