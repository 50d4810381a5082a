"""What a user reads in the terminal, through the real commands: a replayed GPT-2 sweep run with ``--n-trials 12``,
then ``status`` and ``leaderboard`` from another process, as on a 100-column terminal.

One number formatter (thousands separators, never e-notation), the budget the command ran with (not the space's),
and the winner's whole configuration on the screen.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pythonpath import child_env

ROOT = Path(__file__).resolve().parents[2]
E_NOTATION = re.compile(r"\d(\.\d+)?e[+-]\d+", re.IGNORECASE)
TRIALS = 12


def _autotune(folder: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "autotune", *args],
        cwd=folder, env=child_env(COLUMNS="100"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The folder of a 12-trial replayed GPT-2 sweep (its space's own budget is larger) and what it printed."""
    folder = tmp_path_factory.mktemp("terminal")
    printed = _autotune(
        folder, "sweep", str(ROOT / "search_spaces/gpt2.yaml"), "--replay",
        str(ROOT / "scripts/data/gpt2_h100_modelled.json"), "--n-trials", str(TRIALS), "--no-mlflow", "--no-report",
    )  # fmt: skip
    return folder, printed


def test_the_sweep_prints_no_e_notation(replayed: tuple[Path, str]) -> None:
    _, printed = replayed
    assert "tokens/s" in printed and not E_NOTATION.search(printed), E_NOTATION.search(printed)


def test_status_counts_the_trials_the_command_asked_for_and_says_finished(replayed: tuple[Path, str]) -> None:
    folder, _ = replayed
    status = _autotune(folder, "status", "--study", "gpt2-replay")
    lines = status.splitlines()
    assert f": {TRIALS} of {TRIALS} measured" in lines[0], lines[0]
    assert lines[-1] == f"finished: its budget of {TRIALS} trials is measured"
    assert not E_NOTATION.search(status)


def test_the_leaderboard_shows_every_knob_of_the_winner_in_100_columns(replayed: tuple[Path, str]) -> None:
    folder, _ = replayed
    board = _autotune(folder, "leaderboard", "--study", "gpt2-replay")
    ranked = json.loads(_autotune(folder, "leaderboard", "--study", "gpt2-replay", "--format", "json"))
    winner = ranked[0]
    assert max(map(len, board.splitlines())) <= 100 and not E_NOTATION.search(board)
    words = set(board.split())
    missing = [f"{k}={v}" for k, v in winner["params"].items() if f"{k}={v}" not in words]
    assert not missing, board
