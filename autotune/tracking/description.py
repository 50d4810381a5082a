"""The sweep's parent run description (``mlflow.note.content``, markdown): what a reader wants first.

While the sweep runs: where the trials appear. Once it has ended: the winner (trial, its ranked value, the
TFLOP/s and MFU of its step, speedup over the PyTorch defaults, the params it changed), how many faster trials
broke a constraint, the trials by outcome and failure class, how to export the winner, and links to the report
and the leaderboard view. Rendered from the record model, as every other view is, so every worker of a study
writes the same text and it names the winner the leaderboard ranks first.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from autotune.labels import trial_run_name
from autotune.numbers import flops_text, quantity
from autotune.records import StudyRecords, TrialRecord
from autotune.records.answers import kernel_never_run_warning
from autotune.tracking.ui import artifact_link, runs_link

__all__ = ["SweepFacts", "ended", "finished", "running"]

_DEFAULT_STORAGE = "sqlite:///autotune.db"  # autotune's own default: the export command needs no --storage then
_VIEW_LABEL = "trials by speedup (the Views menu's autotune leaderboard)"


@dataclass(frozen=True)
class SweepFacts:
    """What the finished description is written from: the study's records and where its runs are."""

    study: str
    experiment_id: str
    run_id: str  # the parent run's
    records: StudyRecords
    storage: str | None = None  # the parent run's ``storage`` param (credentials redacted)
    pages: Sequence[str] = ()  # HTML artifacts of the parent run (the report)


def running(study: str, experiment_id: str) -> str:
    """The description while the sweep runs."""
    return "\n\n".join(
        [
            "**Sweep running.** Each measured trial appears as a child run with its metrics and, once it ranks, "
            "`speedup` (over the PyTorch defaults); the winner is written here when the sweep ends.",
            f"**Leaderboard:** [{_VIEW_LABEL}]({runs_link(experiment_id)}) · from a terminal: "
            f"`autotune status --study {shlex.quote(study)}`",
        ]
    )


def finished(facts: SweepFacts) -> str:
    """The description once the sweep has ended; the links come second, above MLflow's "Show more" fold."""
    links = [f"**Report:** [{page}]({artifact_link(facts.experiment_id, facts.run_id, page)})" for page in facts.pages]
    links.append(f"**Leaderboard:** [{_VIEW_LABEL}]({runs_link(facts.experiment_id)})")
    warnings = "  \n".join(kernel_never_run_warning(path) for path in facts.records.kernels_never_run())
    parts = [_winner(facts.records), " · ".join(links), _trial_counts(facts.records), warnings, _export(facts)]
    return "\n\n".join(part for part in parts if part)


def ended(status: str, reason: str) -> str:
    """The description of a sweep that ended before its budget on an error (FAILED) or a stop signal (KILLED)."""
    headline = "**Sweep stopped** by a signal" if status == "KILLED" else "**Sweep failed**"
    return "\n\n".join(
        [f"{headline}: {reason}", "Re-running the same `autotune sweep` command resumes it; its trials are kept."]
    )


def _winner(records: StudyRecords) -> str:
    winner = records.winner
    broke = _faster_infeasible(records)
    if winner is None or winner.value is None:
        return "**No winner:** no feasible trial finished ok." + (f" {broke}" if broke else "")
    measured = f"**{_number(winner.value, _unit(records, winner))}** {records.metric} ({winner.value_is})"
    if limit := flops_text(winner.tflops, winner.mfu):
        measured += f" at {limit}"
    default = records.default
    if default is not None and default.number == winner.number:
        head = f"**Winner: the PyTorch defaults** (trial {winner.number}): {measured}"
        head += "; no feasible configuration ranked higher."
        return head + (f"  \n{broke}" if broke else "")
    head = f"**Winner: trial {winner.number}** `{trial_run_name(winner.number, winner.params)}`: {measured}"
    speedup = records.speedup(winner)
    if default is None or speedup is None or records.baseline is None:
        head += "; the PyTorch defaults have no figure to compare with."
    else:
        base = _number(records.baseline, _unit(records, default))
        head += f", **{speedup:.2f}x** the PyTorch defaults (trial {default.number}: {base})."
    lines = [head]
    if default is not None:
        lines.append(_changes(default, winner))
    if broke:
        lines.append(broke)
    return "  \n".join(lines)  # line breaks: one paragraph


def _faster_infeasible(records: StudyRecords) -> str:
    faster = records.faster_infeasible()
    if not faster:
        return ""
    numbers = ", ".join(str(r.number) for r in faster[:5]) + (" ..." if len(faster) > 5 else "")
    were = "trial" if len(faster) == 1 else "trials"
    return f"{len(faster)} faster {were} broke a constraint and do not rank (trials {numbers}): see `autotune.outcome`."


def _changes(default: TrialRecord, winner: TrialRecord) -> str:
    ours, theirs = winner.ran_with, default.ran_with
    changed = [f"`{key}` {theirs.get(key, '-')} → **{new}**" for key, new in ours.items() if theirs.get(key) != new]
    return "Changed from the defaults: " + (", ".join(changed) if changed else "nothing (the same params)") + "."


def _trial_counts(records: StudyRecords) -> str:
    tally = records.tally()
    outcomes = Counter(r.outcome for r in records.measured)
    for settled in ("ok", "infeasible", "pruned"):
        outcomes.pop(settled, None)
    text = f"**Trials:** {tally.measured} measured: {tally.ok - tally.infeasible} ok"
    if tally.infeasible:
        text += f", {tally.infeasible} infeasible (broke a constraint)"
    text += f", {tally.pruned} pruned, {tally.failed} failed"
    if outcomes:
        text += " (" + ", ".join(f"{outcome} {count}" for outcome, count in outcomes.most_common()) + ")"
    return text + "."


def _export(facts: SweepFacts) -> str:
    command = f"autotune export --study {shlex.quote(facts.study)}"
    if facts.storage and facts.storage != _DEFAULT_STORAGE:
        command += f" --storage {shlex.quote(facts.storage)}"
    return f"**Export the winner:** `{command} -o tuned.yaml`"


def _unit(records: StudyRecords, record: TrialRecord) -> str:
    return str(record.metrics.get("throughput_unit", "")) if records.metric == "throughput" else ""


def _number(value: float, unit: str) -> str:
    """4 significant digits, thousands separated, and the unit: ``176.3 images/s``, ``108,290 samples/s``."""
    return quantity(value, unit)
