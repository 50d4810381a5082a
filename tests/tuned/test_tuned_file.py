"""Reading a tuned-config file: one-line errors that name the problem, and a warning when measured elsewhere."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from tuned_files import here_env, write_config

import autotune
from autotune.errors import AutotuneError
from autotune.tuned.file import EnvMismatchWarning, load


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AutotuneError, match=r"tuned config .*nope.yaml: not found"):
        load(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schema_version": 2}, "schema_version 2 is not supported (this autotune reads 1"),
        ({"schema_version": None}, "no schema_version (this autotune reads 1)"),
        ({"knobs": {"precision": "bf16", "warp_speed": 9}}, "unknown knob 'warp_speed'; knobs are: batch_size"),
        ({"knobs": {"precision": "fp8"}}, "knob precision='fp8' is not valid"),
        ({"knob": {"precision": "bf16"}}, "unknown section(s) knob"),
        ({"kernels": [1, 2]}, "kernels must be a mapping, got list"),
    ],
)
def test_load_errors_name_the_problem(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    path = write_config(tmp_path / "tuned.yaml", **changes)
    with pytest.raises(AutotuneError) as caught:
        load(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"tuned config {path}: ")


def test_load_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "tuned.yaml"
    path.write_text("schema_version: 1\nknobs: {precision: bf16\n")
    with pytest.raises(AutotuneError, match=r"not valid YAML \(.* at line \d+\)$"):
        load(path)


def test_load_warns_when_measured_elsewhere(tmp_path: Path) -> None:
    env = {**here_env(), "torch": "2.0.0", "gpu": "NVIDIA H200"}
    path = write_config(tmp_path / "tuned.yaml", provenance={"env": env})
    with pytest.warns(EnvMismatchWarning) as caught:
        load(path)
    message = str(caught[0].message)
    assert message.startswith("tuned.yaml was measured on NVIDIA H200 / torch 2.0.0; this machine has ")
    assert f"torch {torch.__version__}" in message and message.endswith("re-tune for numbers that hold")


def test_load_is_quiet_on_the_same_machine(tmp_path: Path) -> None:
    env = {**here_env(), "torch": torch.__version__.split("+")[0] + "+cu999", "host": "elsewhere"}
    path = write_config(tmp_path / "tuned.yaml", provenance={"env": env})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        autotune.load(path)  # the top-level, lazily imported entry point


def test_load_names_a_bad_inductor_option(tmp_path: Path) -> None:
    path = write_config(tmp_path / "tuned.yaml", knobs={"compile_mode": "default", "inductor": {"max_autotun": True}})
    with pytest.raises(AutotuneError, match="max_autotun: unknown Inductor option"):
        load(path)
