"""scripts/sweep_time.py over a real SQLite study: the sweep's figures, and the search's alone (--search-only)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from recorded_studies import add_timed, make_info, make_study

REPO = Path(__file__).resolve().parents[2]


def _figures(tmp_path: Path, *flags: str) -> dict[str, float]:
    command = [sys.executable, str(REPO / "scripts" / "sweep_time.py"), "--study", "s", "--storage"]
    done = subprocess.run(
        [*command, f"sqlite:///{tmp_path}/s.db", "--json", *flags], capture_output=True, text=True, check=True
    )
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def test_search_only_leaves_the_finalists_out_of_the_time_and_of_the_best(tmp_path: Path) -> None:
    study = make_study(tmp_path, make_info())
    add_timed(study, "none", seconds=10.0, compile_s=0.0, value=100.0)
    source = add_timed(study, "default", seconds=40.0, compile_s=30.0, value=200.0)
    add_timed(study, "default", seconds=200.0, compile_s=190.0, value=210.0, finalist_of=source)
    whole, search = _figures(tmp_path), _figures(tmp_path, "--search-only")
    assert (whole["measured"], whole["trial_s"], whole["compile_s"]) == (3, 250.0, 220.0)
    assert (whole["winner"], whole["to_within_2pct_s"]) == (2, 250.0)  # only the finalist is within 2% of itself
    assert (search["measured"], search["trial_s"], search["compile_s"]) == (2, 50.0, 30.0)
    assert (search["winner"], search["winner_value"], search["to_within_2pct_s"]) == (source, 200.0, 50.0)
