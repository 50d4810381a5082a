"""Sweep progress: what a person reads in a log file while a sweep runs."""

from __future__ import annotations

import io

from autotune.records import Tally
from autotune.views.progress import Progress


def test_a_log_file_gets_one_plain_line_per_trial() -> None:
    log = io.StringIO()
    progress = Progress(budget=20, deadline=None, stream=log)
    progress.started("t003 bf16")
    progress.finished("t003 bf16", "ok throughput 100,000", 12.0, True, Tally(4, 0, 1), "t003 100,000")
    progress.finished("t004 fp32", "pruned: slow", 7.0, True, Tally(5, 1, 1), "t003 100,000")
    progress.finished("t005 bf16", "same as trial 3, not run again", 0.0, False, Tally(5, 1, 1), "t003 100,000")
    assert log.getvalue().splitlines() == [
        "[4/20 done, 1 failed] t003 bf16: ok throughput 100,000 (12s) | best t003 100,000",
        "[5/20 done, 1 pruned, 1 failed] t004 fp32: pruned: slow (7s) | best t003 100,000",
        "[5/20 done, 1 pruned, 1 failed] t005 bf16: same as trial 3, not run again (0s) | best t003 100,000",
    ]  # no terminal control codes in a file


def test_the_eta_comes_from_this_workers_measured_trials() -> None:
    progress = Progress(budget=10, deadline=None, stream=io.StringIO())
    assert progress.eta() == "?"
    progress.finished("t000", "ok", 30.0, True, Tally(1, 0, 0), "t000")
    progress.finished("t001", "duplicate", 0.0, False, Tally(1, 0, 0), "t000")  # free: no effect on the rate
    progress.finished("t002", "ok", 30.0, True, Tally(2, 0, 0), "t000")
    assert progress.eta() == "4m00s"  # 8 trials left at 30 s each


def test_proposals_answered_alike_without_a_run_are_said_once_and_counted() -> None:
    log = io.StringIO()
    progress = Progress(budget=16, deadline=None, stream=log)
    refused = "attention_backend=efficient cannot run this model's attention in bf16 (trial 25)"
    for number in (26, 28, 29, 30):
        progress.finished(f"t0{number} bf16", refused, 0.0, False, Tally(10, 4, 4), "t001 40,081")
    progress.finished("t031 tf32", "rejected by rule: batch_size <= 8", 0.0, False, Tally(10, 4, 4), "t001 40,081")
    progress.finished("t032 bf16", "ok throughput 36,421", 55.0, True, Tally(11, 4, 4), "t001 40,081")
    lines = log.getvalue().splitlines()
    assert [line.split("] ")[1].split(":")[0] for line in lines] == ["t026 bf16", "t031 tf32", "t032 bf16"]
    assert progress.skipped == 5  # every proposal that ran nothing counted (the summary's "not run")
