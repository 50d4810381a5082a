"""The record model reads a rehearsed start off the study: what ships is what the rehearsal saved, when it ran from
the trial's own artifacts and saved some; else the trial's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from recorded_studies import add_trial, make_info, make_study, ok_result

from autotune.records import Rehearsal, StudyRecords, schema

OWN: dict[str, Any] = {"file": "a" * 64 + ".bin", "sha256": "a" * 64, "bytes": 10, "env": {"torch": "2.11.0"}}
REHEARSED: dict[str, Any] = {"file": "b" * 64 + ".bin", "sha256": "b" * 64, "bytes": 12, "env": {"torch": "2.11.0"}}


def winner_records(tmp_path: Path, rehearsal: dict[str, Any] | None) -> StudyRecords:
    info = make_info()
    study = make_study(tmp_path, info)
    add_trial(study, info, ok_result(100.0, compile_mode="none"), default=True)
    winner = ok_result(300.0, compile_mode="default")
    winner.metrics["compile_s"] = 40.0
    winner.extra["compile_artifacts"] = dict(OWN)
    number = add_trial(study, info, winner)
    if rehearsal is not None:
        study.set_user_attr(schema.rehearsed_key(number), rehearsal)
    return StudyRecords.read(study, info)


def test_a_rehearsed_start_ships_what_it_saved(tmp_path: Path) -> None:
    rehearsal = Rehearsal(OWN["sha256"], "ok", loaded=True, start_s=8.5, load_s=1.25, artifacts=REHEARSED)
    records = winner_records(tmp_path, rehearsal.to_dict())
    winner = records.winner
    assert winner is not None and winner.start_rehearsal == rehearsal
    assert winner.shipped_artifacts == REHEARSED and winner.compile_artifacts == OWN  # the trial's own stay recorded


@pytest.mark.parametrize(
    "rehearsal",
    [
        Rehearsal(OWN["sha256"], "timeout", reason="the start took more than 600 s"),  # it saved nothing
        Rehearsal(OWN["sha256"], "ok", loaded=True, start_s=3.0),  # ok, but it saved nothing
        Rehearsal("c" * 64, "ok", loaded=True, start_s=3.0, artifacts=REHEARSED),  # of other artifacts
    ],
    ids=["failed", "saved-nothing", "other-artifacts"],
)
def test_otherwise_the_trials_own_artifacts_ship(tmp_path: Path, rehearsal: Rehearsal) -> None:
    records = winner_records(tmp_path, rehearsal.to_dict())
    assert records.winner is not None and records.winner.shipped_artifacts == OWN
    # a rehearsal of these artifacts that ended ok is done; one that failed, or of other artifacts, is not
    assert records.winner.rehearsable is not (rehearsal.ok and rehearsal.of_sha256 == OWN["sha256"])


def test_a_rehearsal_noted_later_reaches_the_records(tmp_path: Path) -> None:
    records = winner_records(tmp_path, None)
    winner = records.winner
    assert winner is not None and winner.rehearsed is None and winner.shipped_artifacts == OWN
    rehearsal = Rehearsal(OWN["sha256"], "ok", loaded=True, start_s=2.0, artifacts=REHEARSED)
    records.note_rehearsed(winner.number, rehearsal.to_dict())
    assert records.winner is not None and records.winner.shipped_artifacts == REHEARSED
    assert records.trial(winner.number).start_rehearsal == rehearsal


def test_a_rehearsal_reads_back_as_written() -> None:
    rehearsal = Rehearsal("d" * 64, "ok", None, True, 7.5, 0.5, REHEARSED, 31.0)
    assert Rehearsal.from_dict(rehearsal.to_dict()) == rehearsal
    assert Rehearsal.from_dict({"of_sha256": "d" * 64, "status": "failed", "start_s": "n/a"}).start_s is None
