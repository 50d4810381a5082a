"""The trial server starts where trials will run; a finishing worker starts it only where a stage runs a trial."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pythonpath import child_env

from autotune.space import load_space
from autotune.sweep import SweepOptions
from autotune.sweep.stages.lineup import finishing_runs_trials

SPACE = """\
workload: {name: "trial_workloads:tiny_mlp", preset: tiny}
device: cpu
budget: {trials: 2, trial_timeout: 2m}
params:
  batch_size: {choices: [4, 8], default: 8}
"""
FINALISTS = """\
finalists:
  top: 1
  compile_mode: default
  inductor: {coordinate_descent_tuning: true}
"""
COMPILED = SPACE + "  compile_mode: [none, default]\n"
# No re-measuring, no rehearsal, no profile: what a quick sweep's finishing worker is left with (the report).
NOTHING_TO_RUN = {"remeasure_top": 0, "rehearse_start": False, "profile_steps": 0}


@pytest.mark.parametrize(
    ("options", "text", "runs"),
    [
        (NOTHING_TO_RUN, SPACE, False),
        ({**NOTHING_TO_RUN, "remeasure_top": 3}, SPACE, True),
        ({**NOTHING_TO_RUN, "profile_steps": 5}, SPACE, True),
        (NOTHING_TO_RUN, SPACE + FINALISTS, True),
        ({**NOTHING_TO_RUN, "rehearse_start": True}, COMPILED, True),
        ({**NOTHING_TO_RUN, "rehearse_start": True}, SPACE, False),  # an eager winner has no compiled start
        ({"replay": Path("records.json")}, SPACE, False),  # recorded answers: nothing runs, whatever the stages
    ],
)
def test_the_finishing_stages_say_whether_they_may_run_a_trial(
    tmp_path: Path, options: dict[str, Any], text: str, runs: bool
) -> None:
    (tmp_path / "space.yaml").write_text(text)
    space = load_space(tmp_path / "space.yaml")
    assert finishing_runs_trials(space, SweepOptions(tracking=False, **options)) is runs


# In a fresh interpreter (a process has one trial server, and another test may have started this one's): a cold
# executor first, then a warm one; the number of trial servers after each.
CHILDREN = """\
import os, sys, time
from pathlib import Path
from autotune.space import load_space
from autotune.sweep import SweepOptions
from autotune.sweep.measurers import trial_executor

def servers():
    me = str(os.getpid())
    children = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == me]
    return [p for p in children if b"forkserver" in (p / "cmdline").read_bytes()]

def _ppid(proc):
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
    except OSError:
        return None

space, options = load_space(sys.argv[1] + "/space.yaml"), SweepOptions(storage=f"sqlite:///{sys.argv[1]}/s.db")
for warm in (False, True):
    trial_executor(space, options, warm=warm)
    time.sleep(0.5)  # the server is started at once where it is
    print(len(servers()))
"""


def test_an_executor_started_cold_starts_no_trial_server(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text(SPACE)
    done = subprocess.run(
        [sys.executable, "-c", CHILDREN, str(tmp_path)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"]  # cold: none; warm: one
