"""A trial's production start, rehearsed: what it cost and what it saved (:mod:`autotune.sweep.stages.rehearsal` runs
it).

A trial's compile artifacts are what its own process compiled; production, loading them into empty cache folders,
may still build kernels under keys the trial's have not (on an H100, GPT-2's coordinate-descent winner built 37
again and ResNet-50's 168, BENCHMARKS.md). The rehearsal is one such start: the exported config in a fresh
interpreter with empty Inductor and Triton folders, its artifacts loaded by ``apply()``; what it then saves (torch's
entries it read or wrote, every Triton kernel and launcher in its folders) is what a production start looks up, so
that is what ships.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Rehearsal"]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Rehearsal:
    """One rehearsed start of a trial's configuration.

    ``of_sha256``: the artifacts it started from (the trial's own); ``status`` and ``reason``: how its process ended
    (``ok``, ``failed`` or ``timeout``, and why); ``loaded``: whether those artifacts were loaded (not on a mismatch:
    it compiled from scratch); ``start_s``: ``apply()`` and the first steps, less those steps' steady time (what
    production pays before it trains at speed: loading the artifacts, compiling, tuning, graph capture), ``load_s``:
    the part of it that loaded the artifacts; ``artifacts``: what it saved (a file in the study's compile-artifacts
    folder, as a trial records one), None when it saved none; ``seconds``: its wall time, the process's start
    included.
    """

    of_sha256: str
    status: str
    reason: str | None = None
    loaded: bool = False
    start_s: float | None = None
    load_s: float | None = None
    artifacts: Mapping[str, Any] | None = None
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"of_sha256": self.of_sha256, "status": self.status, "loaded": self.loaded}
        extra = {
            "reason": self.reason,
            "start_s": self.start_s,
            "load_s": self.load_s,
            "artifacts": dict(self.artifacts) if self.artifacts is not None else None,
            "seconds": self.seconds,
        }
        return data | {key: value for key, value in extra.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rehearsal:
        artifacts = data.get("artifacts")
        return cls(
            of_sha256=str(data.get("of_sha256", "")),
            status=str(data.get("status", "")),
            reason=str(data["reason"]) if data.get("reason") else None,
            loaded=bool(data.get("loaded")),
            start_s=_number(data.get("start_s")),
            load_s=_number(data.get("load_s")),
            artifacts=dict(artifacts) if isinstance(artifacts, Mapping) else None,
            seconds=_number(data.get("seconds")),
        )
