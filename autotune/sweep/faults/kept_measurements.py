"""Measurements kept outside a study whose disk was full, recorded onto their trials when the sweep resumes.

The reserve (:mod:`autotune.sweep.faults.disk_reserve`) normally gives a trial's record room. Where it cannot (a
PostgreSQL server's disk, space taken again at once by whatever filled the disk), the measured
trial's outcome is written to a small JSON file on another file system, and the trial stays RUNNING
in the study. The resumed sweep finds the file and records the outcome onto that trial before
anything retries it (:func:`autotune.sweep.faults.full_disk.FullDiskGuard.start`), so the trial is neither
lost nor measured again.

Folders, tried in order (the first that takes the file keeps it; a resumed sweep looks in all):
the study's cache folder (beside a SQLite study: found again with it, once space is freed there),
``$XDG_STATE_HOME/autotune/kept`` (else ``~/.local/state/autotune/kept``) and the temporary folder.
A file is named by a hash of the storage and the study, so studies never pick up each other's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.atomicfile import write_atomically
from autotune.errors import AutotuneError
from autotune.measurement import TrialResult
from autotune.storage.sqlitelock import sqlite_path
from autotune.trial.compilecache import study_cache_dir

__all__ = ["KeptMeasurement", "keep", "kept_folders", "kept_measurements"]

_FOLDER = "kept"


@dataclass(frozen=True)
class KeptMeasurement:
    """A measured trial's outcome that its study could not take: the trial (id and number), its params, its result.

    ``path`` is the file it is kept in (empty until kept).
    """

    trial_id: int
    number: int
    params: dict[str, Any]
    result: TrialResult
    path: Path = Path()

    def to_dict(self) -> dict[str, Any]:
        result = self.result.to_dict()
        return {"trial_id": self.trial_id, "number": self.number, "params": self.params, "result": result}

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path) -> KeptMeasurement:
        result = TrialResult.from_dict(data["result"])
        return cls(int(data["trial_id"]), int(data["number"]), dict(data["params"]), result, path)

    def forget(self) -> None:
        """Delete the file: the measurement is in the study now."""
        self.path.unlink(missing_ok=True)


def kept_folders(storage: str, study: str) -> list[Path]:
    """Where measurements of ``study`` are kept, in the order they are tried."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    folders = [Path(state) / "autotune" / _FOLDER, Path(tempfile.gettempdir()) / f"autotune-{os.getuid()}" / _FOLDER]
    if sqlite_path(storage) is not None:
        folders.insert(0, study_cache_dir(storage, study) / _FOLDER)
    return folders


def keep(storage: str, study: str, measurement: KeptMeasurement) -> KeptMeasurement:
    """Write ``measurement`` to the first folder that takes it; it comes back with its ``path``.

    Raises :class:`~autotune.errors.AutotuneError` when no folder can take it.
    """
    text = json.dumps({"study": study, **measurement.to_dict()})
    refusals = []
    for folder in kept_folders(storage, study):
        path = folder / f"{_study_key(storage, study)}-trial{measurement.number}.json"
        try:
            write_atomically(path, text)
        except AutotuneError as exc:
            refusals.append(str(exc))
            with contextlib.suppress(OSError):
                folder.rmdir()  # made for this file, and empty: leave nothing behind on the full disk
            continue
        return KeptMeasurement(measurement.trial_id, measurement.number, measurement.params, measurement.result, path)
    raise AutotuneError("; ".join(refusals))


def kept_measurements(storage: str, study: str) -> list[KeptMeasurement]:
    """Every measurement kept for ``study`` of ``storage``, in trial order (unreadable files are left alone)."""
    found: dict[int, KeptMeasurement] = {}
    for folder in kept_folders(storage, study):
        for path in sorted(folder.glob(f"{_study_key(storage, study)}-trial*.json")):
            try:
                measurement = KeptMeasurement.from_dict(json.loads(path.read_text()), path)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            found.setdefault(measurement.trial_id, measurement)
    return sorted(found.values(), key=lambda m: m.number)


def _study_key(storage: str, study: str) -> str:
    """The same for every spelling of one SQLite file's URL (relative or absolute), distinct across studies."""
    database = sqlite_path(storage)
    where = str(database.resolve()) if database is not None else storage
    return hashlib.sha256(f"{where}\n{study}".encode()).hexdigest()[:16]
