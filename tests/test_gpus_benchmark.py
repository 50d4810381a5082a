"""scripts/gpus_benchmark.py: the search window it sweeps (no finalists) and its bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpus_benchmark.py"
sys.path.insert(0, str(REPO / "scripts"))

from gpus_benchmark import search_only  # noqa: E402


def test_the_window_sweeps_the_space_without_its_finalists(tmp_path: Path) -> None:
    space = REPO / "search_spaces" / "resnet50.yaml"
    assert "finalists:" in space.read_text()
    searched = search_only(space, tmp_path).read_text()
    assert "finalists:" not in searched and "inductor" not in searched
    assert "params:" in searched and "batch_size" in searched  # every other key kept


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["no-such.yaml", "--gpus", "0"], [str(REPO / "search_spaces" / "quick.yaml"), "--gpus", "0",
                                                   "--window", "0"]):  # fmt: skip
        done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
