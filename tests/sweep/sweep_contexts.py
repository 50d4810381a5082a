"""A sweep worker's context over a new SQLite study, for tests of one part of the sweep (a stage, a proposal)
without running the loop: its trials, where a test runs any, in real processes."""

from __future__ import annotations

import io
from pathlib import Path

import optuna

from autotune.records import StudyRecords, schema
from autotune.space import load_space
from autotune.sweep import SweepOptions
from autotune.sweep.context import SweepContext
from autotune.sweep.measurers import TrialExecutor
from autotune.sweep.options import study_name
from autotune.sweep.setup import study_info
from autotune.views.progress import Progress


def sweep_context(folder: Path, space_text: str, said: io.StringIO, name: str = "study") -> SweepContext:
    """The context of a sweep of ``space_text`` (written to ``folder/NAME.yaml``) over a new study in
    ``folder/NAME.db``, its progress lines written to ``said``."""
    folder.mkdir(parents=True, exist_ok=True)
    space_file = folder / f"{name}.yaml"
    space_file.write_text(space_text)
    space = load_space(space_file)
    options = SweepOptions(storage=f"sqlite:///{folder}/{name}.db", tracking=False)
    info = study_info(space, options)
    study = optuna.create_study(storage=options.storage, study_name=study_name(space, options), direction="maximize")
    study.set_user_attr(schema.STUDY_ATTR_INFO, info.to_dict())
    records = StudyRecords.read(study, info)
    executor = TrialExecutor(space, options)
    progress = Progress(None, None, said)
    return SweepContext(space, options, study, study._storage, info, records, executor, progress, None)
