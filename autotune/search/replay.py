"""Answer trials from measurements recorded on a real GPU, so search strategies run on CPU.

A replay file is JSON: either a bare list of records, or an object whose ``records`` key holds
the list and whose ``device`` key describes the machine that measured them (other keys, such as
``what``, ``measured`` and ``reference``, are kept as :attr:`ReplayRecords.meta`). A record is::

    {"params": {"BLOCK_M": 128, ...}, "status": "ok", "ms": 1.71, "tflops": 642.0}
    {"params": {...}, "status": "out_of_resources", "error": "OutOfResources: ... Required: 245760 ..."}

Matching rules (:meth:`ReplayRecords.lookup`):

- only the parameters the records name count; a trial's other parameters (fixed knobs) are ignored;
- numbers match by value, so ``64 == 64.0``; strings match strings exactly; a string never matches
  a number (``"64"`` is not ``64``) and a bool never matches a number (``True`` is not ``1``):
  such a mismatch is more likely a mistyped space than an intent, so it surfaces as a missing record;
- a configuration with no record is an error (:class:`~autotune.errors.AutotuneError`), since
  inventing a result would make a deterministic comparison meaningless;
- when several records have the same parameters the first wins; :attr:`ReplayRecords.duplicates`
  counts the others, which ``len()``, :meth:`~ReplayRecords.values` and ``best`` ignore.
"""

from __future__ import annotations

import copy
import json
import numbers
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError
from autotune.measurement import Status, TrialResult

__all__ = ["ReplayRecords"]

# Recorded status -> trial status; Triton's out_of_resources is this project's oom.
_STATUSES: dict[str, Status] = {"out_of_resources": Status.OOM, **{s.value: s for s in Status}}
_NOT_METRICS = ("params", "status", "error")
_Key = tuple[tuple[str, tuple[str, Any]], ...]


def _normalise(value: Any) -> tuple[str, Any]:
    """A hashable, comparable form: numbers by value, strings and bools kept apart from them."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return ("number", int(number) if number.is_integer() else number)
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("none", None)
    raise TypeError(f"{type(value).__name__} {value!r} is not a scalar")


def _metrics(record: Mapping[str, Any]) -> dict[str, Any]:
    """The numeric fields of a record, with ``throughput`` in TFLOP/s derived from ``tflops`` (else the record's
    ``throughput_unit``, where it names one)."""
    out: dict[str, Any] = {
        name: value
        for name, value in record.items()
        if name not in _NOT_METRICS and isinstance(value, numbers.Real) and not isinstance(value, bool)
    }
    if "tflops" in out and "throughput" not in out:
        out["throughput"] = out["tflops"]
        out["throughput_unit"] = "TFLOP/s"
    elif isinstance(record.get("throughput_unit"), str):
        out["throughput_unit"] = record["throughput_unit"]
    return out


class ReplayRecords:
    """Recorded measurements, looked up by configuration. Build with :meth:`load`."""

    def __init__(
        self,
        records: list[dict[str, Any]],
        *,
        source: str = "<memory>",
        device: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.source = source
        self.device: dict[str, Any] = dict(device or {})
        self.meta: dict[str, Any] = dict(meta or {})
        for index, record in enumerate(records):
            self._check_record(index, record)
        self.param_names: tuple[str, ...] = tuple(sorted({name for r in records for name in r["params"]}))
        self._by_key: dict[_Key, dict[str, Any]] = {}
        for record in records:
            self._by_key.setdefault(self._key(record["params"]), record)
        self.duplicates = len(records) - len(self._by_key)

    @classmethod
    def load(cls, path: str | Path) -> ReplayRecords:
        """Read a replay file; a missing, unreadable or malformed one raises AutotuneError."""
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise AutotuneError(f"replay file {path}: not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise AutotuneError(f"replay file {path}: cannot read it ({exc})") from None
        except json.JSONDecodeError as exc:
            raise AutotuneError(f"replay file {path}: not valid JSON ({exc})") from None
        if isinstance(data, list):
            return cls(data, source=str(path))
        if not isinstance(data, dict) or not isinstance(data.get("records"), list):
            raise AutotuneError(f"replay file {path}: expected a list of records or an object with a 'records' list")
        device = data.get("device", {})
        if not isinstance(device, dict):
            raise AutotuneError(f"replay file {path}: 'device' must be an object, got {type(device).__name__}")
        meta = {k: v for k, v in data.items() if k not in ("records", "device")}
        return cls(data["records"], source=str(path), device=device, meta=meta)

    def _check_record(self, index: int, record: Any) -> None:
        where = f"replay file {self.source}: record {index}"
        if not isinstance(record, dict) or not isinstance(record.get("params"), dict):
            raise AutotuneError(f"{where}: expected an object with a 'params' object, got {record!r:.80}")
        if record.get("status") not in _STATUSES:
            known = ", ".join(_STATUSES)
            raise AutotuneError(f"{where}: unknown status {record.get('status')!r} (known: {known})")
        for name, value in record["params"].items():
            try:
                _normalise(value)
            except TypeError as exc:
                raise AutotuneError(f"{where}: parameter {name!r}: {exc}") from None

    def _key(self, params: Mapping[str, Any]) -> _Key:
        # A name the trial (or record) lacks gets a marker of its own, so it matches only another absence.
        return tuple(
            (name, _normalise(params[name]) if name in params else ("absent", None)) for name in self.param_names
        )

    @property
    def env(self) -> dict[str, Any]:
        """The fingerprint every replayed result carries: the recording device, plus this file."""
        return {**self.device, "replay": self.source}

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, params: object) -> bool:
        return isinstance(params, Mapping) and self._find(params) is not None

    def values(self) -> Iterator[dict[str, Any]]:
        """The records, first of each configuration, in file order (copies: mutating them is harmless)."""
        for record in self._by_key.values():
            yield copy.deepcopy(record)

    def _find(self, params: Mapping[str, Any]) -> dict[str, Any] | None:
        try:
            return self._by_key.get(self._key(params))
        except TypeError:  # a non-scalar value never matches a record
            return None

    def record(self, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """A copy of the record for ``params`` as the file has it (extra parameters ignored); None when none."""
        record = self._find(params)
        return copy.deepcopy(record) if record is not None else None

    def lookup(self, params: Mapping[str, Any]) -> TrialResult:
        """The recorded result for ``params`` (extra parameters ignored); no record raises AutotuneError."""
        record = self._find(params)
        if record is None:
            named = ", ".join(f"{name}={params.get(name, '<absent>')!r}" for name in self.param_names)
            raise AutotuneError(f"replay file {self.source}: no record for configuration {named}")
        status = _STATUSES[record["status"]]
        if status is Status.OK:
            return TrialResult(status, params=dict(params), metrics=_metrics(record), env=self.env)
        reason = record.get("error") or f"recorded as {record['status']}"
        result = TrialResult.failed(status, reason, params=dict(params))
        result.env = self.env
        return result

    def best(self, metric: str, direction: str = "maximize") -> dict[str, Any]:
        """The ok record with the best ``metric`` (``throughput`` is derived from ``tflops``)."""
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction=}")
        scored = [
            (_metrics(r)[metric], r) for r in self._by_key.values() if r["status"] == "ok" and metric in _metrics(r)
        ]
        if not scored:
            raise AutotuneError(f"replay file {self.source}: no ok record has metric {metric!r}")
        pick = max if direction == "maximize" else min
        return copy.deepcopy(pick(scored, key=lambda pair: pair[0])[1])
