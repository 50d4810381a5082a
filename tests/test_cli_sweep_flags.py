"""``autotune sweep``'s options as the SweepOptions they ask for: its defaults are the dataclass's, and each flag
sets its field (the negative flags, --profile and --gpus through their conversions)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from autotune.cli import _SWEEP_FLAGS, cli
from autotune.sweep import SweepOptions


class _Asked(Exception):
    def __init__(self, options: SweepOptions) -> None:
        self.options = options


def _asked(monkeypatch: pytest.MonkeyPatch, *args: str) -> SweepOptions:
    """The SweepOptions ``autotune sweep space.yaml ARGS`` hands run_sweep (the space is not read)."""

    def run_sweep(_space: Any, options: SweepOptions) -> None:
        raise _Asked(options)

    monkeypatch.setattr("autotune.space.load_space", lambda *_args, **_kwargs: None)
    monkeypatch.setattr("autotune.sweep.run_sweep", run_sweep)
    with pytest.raises(_Asked) as asked:
        cli.main(["sweep", "space.yaml", *args], standalone_mode=False)
    return asked.value.options


def test_every_flag_sets_a_field_once() -> None:
    fields = {f.name for f in dataclasses.fields(SweepOptions)}
    named = [flag.field for flag in _SWEEP_FLAGS]
    assert set(named) <= fields and len(set(named)) == len(named)


def test_no_flags_ask_for_the_dataclass_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _asked(monkeypatch) == SweepOptions()


def test_each_flag_sets_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asked(
        monkeypatch,
        *("--study", "s", "--n-trials", "5", "--timeout", "30m", "--storage", "sqlite:///x.db", "--device", "cpu"),
        *("--seed", "7", "--tracking-uri", "file:///m", "--no-mlflow", "--memory-cap", "2.5", "--remeasure-top", "1"),
        *("--remeasure-repeats", "2", "--patience", "4", "--prune-below", "0.25", "--profile", "--warm-start", "w"),
        *("--no-informed-start", "--no-rehearse-start", "--no-report", "--no-compile-ahead", "--gpus", "0,1"),
    )
    expected: dict[str, Any] = {
        **{"study_name": "s", "n_trials": 5, "timeout_s": 1800.0, "storage": "sqlite:///x.db", "device": "cpu"},
        **{"seed": 7, "tracking_uri": "file:///m", "tracking": False, "memory_cap_gib": 2.5, "remeasure_top": 1},
        **{"remeasure_repeats": 2, "patience": 4, "prune_ratio": 0.25, "profile_steps": 5, "warm_start": "w"},
        **{"informed_start": False, "rehearse_start": False, "report": False, "compile_ahead": False},
        **{"gpus": ("0", "1")},
    }
    assert asked == SweepOptions(**expected)
    assert {flag.field for flag in _SWEEP_FLAGS} - set(expected) == {"replay"}  # --profile excludes it: below


def test_replay_and_compile_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _asked(monkeypatch, "--replay", "records.json", "--compile-ahead")
    assert (asked.replay, asked.compile_ahead) == (Path("records.json"), True)
