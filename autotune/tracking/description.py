"""The sweep's parent run description (``mlflow.note.content``, markdown): what a reader wants first.

While the sweep runs: where the trials appear. Once it has ended: the winner (trial, throughput,
speedup over the PyTorch defaults, the params it changed), the trials by outcome and failure class,
how to export the winner, and links to the report and the leaderboard view. Built from the runs
as MLflow holds them, so every worker of a study writes the same text.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from mlflow.entities import Run

from autotune.tracking.schema import REMEASURED_THROUGHPUT, TAG_STATUS, TAG_TRIAL, TAG_UNIT
from autotune.tracking.speedup import is_default, is_ok, ranked_throughput, speedup
from autotune.tracking.ui import artifact_link, runs_link

__all__ = ["SweepFacts", "ended", "finished", "running"]

_DEFAULT_STORAGE = "sqlite:///autotune.db"  # autotune's own default: the export command needs no --storage then
_VIEW_LABEL = "trials by speedup (the Views menu's autotune leaderboard)"


@dataclass(frozen=True)
class SweepFacts:
    """What the finished description is written from: the study, its runs, the winner the leaderboard named."""

    study: str
    experiment_id: str
    run_id: str  # the parent run's
    trials: Sequence[Run]
    winner: int | None
    storage: str | None = None  # the parent run's ``storage`` param (credentials redacted)
    pages: Sequence[str] = ()  # HTML artifacts of the parent run (the report)


def running(study: str, experiment_id: str) -> str:
    """The description while the sweep runs."""
    return "\n\n".join(
        [
            "**Sweep running.** Each measured trial appears as a child run with `throughput` and `speedup` "
            "(over the PyTorch defaults); the winner is written here when the sweep ends.",
            f"**Leaderboard:** [{_VIEW_LABEL}]({runs_link(experiment_id)}) · from a terminal: "
            f"`autotune status --study {shlex.quote(study)}`",
        ]
    )


def finished(facts: SweepFacts) -> str:
    """The description once the sweep has ended; the links come second, above MLflow's "Show more" fold."""
    links = [f"**Report:** [{page}]({artifact_link(facts.experiment_id, facts.run_id, page)})" for page in facts.pages]
    links.append(f"**Leaderboard:** [{_VIEW_LABEL}]({runs_link(facts.experiment_id)})")
    return "\n\n".join([_winner(facts), " · ".join(links), _trial_counts(facts.trials), _export(facts)])


def ended(status: str, reason: str) -> str:
    """The description of a sweep that ended before its budget on an error (FAILED) or a stop signal (KILLED)."""
    headline = "**Sweep stopped** by a signal" if status == "KILLED" else "**Sweep failed**"
    return "\n\n".join(
        [f"{headline}: {reason}", "Re-running the same `autotune sweep` command resumes it; its trials are kept."]
    )


def _winner(facts: SweepFacts) -> str:
    numbered = {run.data.tags.get(TAG_TRIAL): run for run in facts.trials}
    winner = numbered.get(str(facts.winner)) if facts.winner is not None else None
    value = ranked_throughput(winner.data.metrics) if winner is not None else None
    if facts.winner is None:
        return "**No winner:** no feasible trial finished ok."
    if winner is None or value is None:
        return f"**Winner: trial {facts.winner}**."  # its run was not logged (MLflow was down and is not caught up)
    unit = winner.data.tags.get(TAG_UNIT, "")
    measured = f"**{_number(value, unit)}**"
    if REMEASURED_THROUGHPUT in winner.data.metrics:
        measured += " (median of its re-measurements)"
    default = next((run for run in facts.trials if is_default(run)), None)
    if default is winner:
        return f"**Winner: the PyTorch defaults** (trial {facts.winner}): {measured}; no configuration measured faster."
    head = f"**Winner: trial {facts.winner}** `{winner.info.run_name}`: {measured}"
    base = ranked_throughput(default.data.metrics) if default is not None and is_ok(default) else None
    if default is None or base is None:
        return head + "; the PyTorch defaults have no throughput to compare with."
    default_number = default.data.tags.get(TAG_TRIAL, "?")
    head += f", **{speedup(value, base):.2f}x** the PyTorch defaults (trial {default_number}: {_number(base, unit)})."
    return f"{head}  \n{_changes(default, winner)}"  # a line break: one paragraph


def _changes(default: Run, winner: Run) -> str:
    ours, theirs = winner.data.params, default.data.params
    changed = [f"`{key}` {theirs.get(key, '-')} → **{new}**" for key, new in ours.items() if theirs.get(key) != new]
    return "Changed from the defaults: " + (", ".join(changed) if changed else "nothing (the same params)") + "."


def _trial_counts(trials: Sequence[Run]) -> str:
    statuses = Counter(run.data.tags.get(TAG_STATUS, "unknown") for run in trials)
    ok, pruned = statuses.pop("ok", 0), statuses.pop("pruned", 0)
    failed = sum(statuses.values())
    text = f"**Trials:** {len(trials)} measured: {ok} ok, {pruned} pruned, {failed} failed"
    if failed:
        text += " (" + ", ".join(f"{status} {count}" for status, count in statuses.most_common()) + ")"
    return text + "."


def _export(facts: SweepFacts) -> str:
    command = f"autotune export --study {shlex.quote(facts.study)}"
    if facts.storage and facts.storage != _DEFAULT_STORAGE:
        command += f" --storage {shlex.quote(facts.storage)}"
    return f"**Export the winner:** `{command} -o tuned.yaml`"


def _number(value: float, unit: str) -> str:
    """4 significant digits, thousands separated, and the unit: ``176.3 images/s``, ``108,290 samples/s``."""
    number = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return f"{number} {unit}".rstrip()
