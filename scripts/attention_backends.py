"""Each ``attention_backend`` measured on each workload: which SDPA kernel wins where, and which cannot run.

    python scripts/attention_backends.py [--case WORKLOAD:PRESET:PARAMS ...] [--timeout 150] [--steps N] [--json FILE]
    # the default cases: llama 1B and ViT-B/16, bf16, eager (the kernels alone, not Inductor's fusions around them)
    python scripts/attention_backends.py
    # on a CPU, to try it: tiny presets
    python scripts/attention_backends.py --device cpu --case llama:tiny:precision=fp32 --case vit:tiny:precision=fp32

A case is ``WORKLOAD:PRESET:KEY=VALUE,KEY=VALUE`` (the knobs and workload params of ``autotune trial -p``). For each
case, one trial per backend (auto, flash, cudnn, efficient, math), each in its own process as ``autotune trial`` runs
it. A backend that cannot run the shape ends ``invalid``, a NaN ``numerics``; either is a row of the table, with its
reason. Prints a Markdown table (throughput, the ratio to ``auto``, step time, peak memory); ``--json FILE`` writes
every trial's result too. Exit code 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autotune.errors import AutotuneError  # noqa: E402  (the repository's package, whatever is installed)
from autotune.knobs.attention import ATTENTION_BACKENDS  # noqa: E402
from autotune.measurement import TrialResult  # noqa: E402
from autotune.numbers import quantity, ratio  # noqa: E402
from autotune.search.costmodel import compiles  # noqa: E402
from autotune.trial.job import check_spec  # noqa: E402
from autotune.trial.trialspec import MeasureSettings, TrialSpec  # noqa: E402
from autotune.trial_process import TrialRunner  # noqa: E402

DEFAULT_CASES = (
    "llama:1b:precision=bf16,batch_size=4",
    "vit:full:precision=bf16,batch_size=128",
)


def parse_case(text: str) -> tuple[str, str, dict[str, Any]]:
    """``WORKLOAD:PRESET:KEY=VALUE,...`` as (workload, preset, params); values read as YAML scalars read them."""
    import yaml

    workload, _, rest = text.partition(":")
    preset, _, assignments = rest.partition(":")
    if not workload or not preset:
        raise ValueError(f"case {text!r}: expected WORKLOAD:PRESET[:KEY=VALUE,...]")
    params: dict[str, Any] = {}
    for assignment in filter(None, assignments.split(",")):
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise ValueError(f"case {text!r}: {assignment!r} is not KEY=VALUE")
        params[key] = yaml.safe_load(value)
    return workload, preset, params


def measure_case(case: str, args: argparse.Namespace, runner: TrialRunner) -> list[dict[str, Any]]:
    """One trial per backend of ``case``, printed as each ends; their rows."""
    workload, preset, params = parse_case(case)
    rows = []
    for backend in ATTENTION_BACKENDS:
        knobs = {**params, "attention_backend": backend}
        spec = TrialSpec(workload, knobs, preset, args.device, {}, MeasureSettings(min_steps=args.steps))
        check_spec(spec)
        result = runner.run(spec, args.timeout)
        rows.append({"case": case, "backend": backend, "result": result.to_dict()})
        print(f"  {case} {backend}: {_outcome(result)}", file=sys.stderr, flush=True)
    return rows


def _outcome(result: TrialResult) -> str:
    if not result.ok:
        return f"{result.status}: {(result.reason or '').splitlines()[0] if result.reason else ''}"
    return quantity(result.metrics["throughput"], result.metrics["throughput_unit"])


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of every case's backends, each against the case's ``auto`` where both ran."""
    lines = [
        "| case | backend | throughput | vs auto | step p50 | peak memory | outcome |",
        "|---|---|---|---|---|---|---|",
    ]
    auto = {row["case"]: row["result"] for row in rows if row["backend"] == "auto" and row["result"]["status"] == "ok"}
    for row in rows:
        result, base = row["result"], auto.get(row["case"])
        if result["status"] != "ok":
            reason = (result.get("reason") or "").splitlines()[0][:100] if result.get("reason") else ""
            lines.append(f"| {row['case']} | {row['backend']} | | | | | {result['status']}: {reason} |")
            continue
        metrics = result["metrics"]
        versus = ratio(metrics["throughput"] / base["metrics"]["throughput"]) if base else ""
        lines.append(
            f"| {row['case']} | {row['backend']} | {quantity(metrics['throughput'], metrics['throughput_unit'])} "
            f"| {versus} | {quantity(metrics['step_ms_p50'], 'ms')} | {quantity(metrics['peak_mem_gib'], 'GiB')} | ok |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="WORKLOAD:PRESET:KEY=VALUE,... (repeatable)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds a trial may take (default: 150)")
    parser.add_argument("--steps", type=int, help="least number of timed steps (default: the trial's)")
    parser.add_argument("--json", type=Path, help="write every trial's result to this file")
    args = parser.parse_args()
    cases = args.case or list(DEFAULT_CASES)
    try:
        for case in cases:
            parse_case(case)
    except ValueError as exc:
        parser.exit(2, f"attention_backends: {exc}\n")
    runner = TrialRunner(compiles=any(compiles(parse_case(case)[2]) for case in cases))
    runner.warm()
    rows: list[dict[str, Any]] = []
    try:
        for case in cases:
            rows += measure_case(case, args, runner)
    except AutotuneError as exc:
        parser.exit(2, f"attention_backends: {exc}\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
