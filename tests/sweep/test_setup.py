"""Opening a study to resume it: a space whose choices changed is bad input, in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.errors import AutotuneError
from autotune.space import Space, load_space
from autotune.sweep import SweepOptions
from autotune.sweep.setup import open_study, study_info

SPACE = """\
workload: {name: resnet50, preset: tiny}
device: cpu
params:
  batch_size: {choices: [4, 8, CHOICE], ordinal: true, default: 8}
"""


def _space(tmp_path: Path, choice: int) -> Space:
    path = tmp_path / "s.yaml"
    path.write_text(SPACE.replace("CHOICE", str(choice)))
    return load_space(path)


def test_changed_choices_are_refused_with_the_param_and_both_lists(tmp_path: Path) -> None:
    options = SweepOptions(storage=f"sqlite:///{tmp_path}/a.db", tracking=False)
    space = _space(tmp_path, 16)
    study = open_study(space, options, study_info(space, options), None).study
    trial = study.ask()
    space.suggest(trial)
    study.tell(trial, 1.0)
    changed = _space(tmp_path, 32)
    with pytest.raises(AutotuneError, match=r"searched batch_size over \[4, 8, 16\], this space over \[4, 8, 32\]"):
        open_study(changed, options, study_info(changed, options), None)
    same = _space(tmp_path, 16)
    open_study(same, options, study_info(same, options), None)  # unchanged choices resume
