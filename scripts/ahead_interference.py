"""Does compiling ahead disturb the trial measured beside it? One configuration measured alone and with compiles
ahead running beside it, alternately, on one machine (the A/B that BENCHMARKS.md "Compiling ahead" asks for).

    python3 scripts/ahead_interference.py --workload resnet50 -p precision=bf16 -p memory_format=channels_last \\
        -p compile_mode=default -p batch_size=512 -p fused_optimizer=true -p cudnn_benchmark=true --repeats 3
    python3 scripts/ahead_interference.py --workload trial_workloads:tiny_mlp --preset tiny --device cpu \\
        -p compile_mode=default --ahead-batches 32 --repeats 2     # the same path on a CPU (tests/ on sys.path)

The measured configuration compiles into its own cache folder once (a warm-up run, not counted), so each run after
it measures with a compile from the cache, as a trial whose graph was compiled ahead does. "beside" starts
``--slots`` compiles ahead (the configuration at each of ``--ahead-batches``, each time into an empty folder, so
they compile for real) just before the trial. Prints each run's throughput and the median of each side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the package, and the test workloads for a CPU check
    from autotune.sweep.proposals.compile_ahead import slots
    from autotune.trial.trialspec import TrialSpec
    from autotune.trial_process import Running, TrialRunner

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", required=True)
    parser.add_argument("--preset", default="full")
    parser.add_argument("--device", default="auto")
    parser.add_argument("-p", dest="params", action="append", default=[], help="key=value of the configuration")
    parser.add_argument("--ahead-batches", type=int, nargs="+", default=[64, 128, 256], help="batch sizes compiled")
    parser.add_argument("--slots", type=int, default=slots(), help="compiles ahead at once (default: as a sweep)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    params: dict[str, Any] = dict(pair.split("=", 1) for pair in args.params)  # the trial job coerces the text
    runner = TrialRunner()
    with tempfile.TemporaryDirectory(prefix="autotune-interference-") as tmp:
        folder = Path(tmp)

        def spec(values: dict[str, Any], cache: Path) -> TrialSpec:
            return TrialSpec(args.workload, values, args.preset, args.device, compile_cache_dir=str(cache))

        def measure(label: str, beside: list[Running]) -> float:
            result = runner.run(spec(params, folder / "measured"), 1800)
            for running in beside:
                running.kill()
            if not result.ok:
                sys.exit(f"the trial ended {result.status.value}: {result.reason}")
            throughput = float(result.metrics["throughput"])
            print(f"{label:7} {throughput:12,.1f} {result.metrics.get('throughput_unit', '')}", flush=True)
            return throughput

        measure("warm-up", [])
        runs: dict[str, list[float]] = {"alone": [], "beside": []}
        for repeat in range(args.repeats):
            order = ("alone", "beside") if repeat % 2 == 0 else ("beside", "alone")
            for label in order:
                beside = []
                if label == "beside":
                    for slot, batch in enumerate(args.ahead_batches[: args.slots]):
                        other = spec({**params, "batch_size": batch}, folder / f"ahead-{repeat}-{slot}")
                        beside.append(runner.compile_ahead(other))
                runs[label].append(measure(label, beside))
        alone, beside_median = statistics.median(runs["alone"]), statistics.median(runs["beside"])
        print(
            f"median alone {alone:,.1f}, beside {args.slots} compiles ahead {beside_median:,.1f}: "
            f"{(beside_median / alone - 1) * 100:+.2f}%"
        )


if __name__ == "__main__":
    main()
