"""Where a study's trial time went: all, compiling, in pruned trials (before compiling, or after); trials per hour.

    python scripts/sweep_time.py --study resnet50 [--storage sqlite:///autotune.db] [--search-only] [--json]

``--search-only`` leaves the finalists out (their trials, and their figure as the best to be within 2% of): the
search's own economy, comparable with a sweep whose finalists did not run.

Reads any autotune study, also one written by an earlier autotune version (it needs only the trials' results and
times), so a sweep's compile economy can be compared before and after a change.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import optuna

from autotune.records import StudyRecords, TrialRecord, schema
from autotune.records.timeshares import time_shares
from autotune.storage import studies as studyio


def figures(study: optuna.Study, search_only: bool = False) -> dict[str, Any]:
    """Trial counts, seconds and trials per hour of the study's measured trials (the record model's time shares);
    with ``search_only``, of its search trials, the finalists left out."""
    info = schema.load_study_info(study)
    objectives = info.objectives if info is not None else (("throughput", "maximize"),)
    records = StudyRecords(study, objectives)
    measured, time, winner = records.measured, records.time(), records.winner
    if search_only:
        measured = [record for record in measured if record.finalist_of is None]
        time, winner = time_shares(measured), _best_searched(records)
    found = records.time_to_within(0.02, target=winner.value if winner and winner.value else None)
    starts = [r.started for r in measured if r.started]
    ends = [r.ended for r in measured if r.ended]
    span_h = (max(ends) - min(starts)).total_seconds() / 3600 if starts and ends else 0.0
    early = [r for r in measured if r.first_metrics.get("pruned_before_compile")]
    return {
        "measured": len(measured),
        "ok": sum(1 for r in measured if r.ok),
        "pruned": sum(1 for r in measured if r.pruned),
        "pruned_before_compile": len(early),
        "trial_s": time.trial_s,
        "compile_s": time.compile_s,
        "pruned_s": time.pruned_s,
        "pruned_share": time.pruned_share or 0.0,
        "span_s": span_h * 3600,
        "trials_per_hour": len(measured) / span_h if span_h else 0.0,
        "to_within_2pct_s": found[0] if found else float("nan"),
        "to_within_2pct_trials": found[1] if found else 0,
        "compile_share": time.compile_share or 0.0,
        "winner": winner.number if winner else -1,
        "winner_value": winner.value if winner and winner.value else float("nan"),
        "line": time.line() or "",
        "detail_lines": time.detail_lines(),
        "ahead_trials": time.ahead.trials,
        "ahead_compile_s": time.ahead.compile_s,
        "ahead_wait_s": time.ahead.wait_s,
        **{f"phases_{metric}": seconds for metric, seconds in time.phases.seconds.items()},
        "autotune_trials": time.autotuning.trials,
        "autotune_s": time.autotuning.seconds,
        "autotune_compile_s": time.autotuning.compile_s,
    }


def _best_searched(records: StudyRecords) -> TrialRecord | None:
    """The best ranked trial of the search (the record model's ranking: re-measured medians where there are)."""
    return next((record for record in records.ranked if record.finalist_of is None), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True)
    parser.add_argument("--storage", default=studyio.DEFAULT_STORAGE)
    parser.add_argument("--search-only", action="store_true", help="leave the finalists out")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    result = figures(optuna.load_study(study_name=args.study, storage=args.storage), args.search_only)
    if args.json:
        print(json.dumps(result))
        return
    print(result.pop("line"))
    for line in result.pop("detail_lines"):
        print(line)
    for key, value in result.items():
        print(f"  {key}: {value:,.1f}" if isinstance(value, float) else f"  {key}: {value}")


if __name__ == "__main__":
    main()
