"""A production start, with and without a tuned config's compile artifacts: fresh processes, empty compile caches.

    # a config exported after a sweep (beside it: tuned.compile-artifacts.bin)
    python scripts/compile_artifacts_benchmark.py tuned.yaml [--steps 3] [--repeats 1] [--with-first] [--warm] [--json]
    # or one configuration, captured first by one trial on this machine (GPT-2, issue 19's GPU goal):
    python scripts/compile_artifacts_benchmark.py --workload gpt2 --preset full \\
        -p precision=bf16 -p compile_mode=default -p fused_optimizer=true -p batch_size=32

Each run is a fresh Python process with empty Inductor and Triton cache folders (TORCHINDUCTOR_CACHE_DIR,
TRITON_CACHE_DIR) that loads the config, builds the workload's model and batches, and times
``cfg.apply(model, optimizer)`` plus the first ``--steps`` training steps (compile included, the device
synchronised), then the steady step (median of ``--steady`` more). "without" applies the same file with its
``compile_artifacts`` section removed; "with" applies it as it is (apply() loads the artifacts); ``--warm`` adds
a run that reuses the "with" run's cache folders, the best a restart on the same machine can do. The runs
alternate without/with when ``--repeats`` > 1. Issue 19's goals: the first steps with the artifacts at most
0.7 of those without on a CPU, and compile (first steps less their steady time) at most 10 s for the GPT-2
and ResNet-50 winners on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


# --- one run: what production does, timed (in its own process) --------------------------------------------------


def run_once(tuned: str, steps: int, steady: int) -> dict[str, Any]:
    import torch

    import autotune
    from autotune import workloads
    from autotune.trial.trainstep import TrainStep, prepare_pair

    cfg = autotune.load(tuned)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    spec = cfg.workload
    workload = workloads.build(spec["name"], spec.get("preset", "full"), {**spec.get("args", {}), **cfg.params}, device)
    assert isinstance(workload, workloads.Workload), "a training workload"
    assert workload.make_batch is not None, "a workload that makes its batches on the device"
    batch_size = cfg.batch_size or workload.default_batch_size
    batches = [workload.make_batch(batch_size, device) for _ in range(3)]
    optimizer = torch.optim.AdamW(workload.model.parameters(), lr=1e-4)  # the trials' optimizer

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    sync()
    started = time.perf_counter()
    model, ctx = cfg.apply(workload.model, optimizer)
    applied = time.perf_counter()
    laid_out = [prepare_pair(ctx, batch) for batch in batches]
    step = TrainStep(workload, model, ctx, optimizer, lambda index: laid_out[index % len(laid_out)])
    step_s = []  # each first step on its own: where the start goes (compile in the first, a CUDA graph's record)
    for index in range(steps):
        begun = time.perf_counter()
        step(index)
        sync()
        step_s.append(time.perf_counter() - begun)
    first_s = time.perf_counter() - started
    steady_ms = []
    for index in range(steps, steps + steady):
        begun = time.perf_counter()
        step(index)
        sync()
        steady_ms.append((time.perf_counter() - begun) * 1e3)
    load = cfg.artifacts_load
    from torch._dynamo.utils import calculate_time_spent, counters

    return {
        "first_steps_s": first_s,
        "apply_s": applied - started,
        "steady_step_ms": statistics.median(steady_ms),
        "compile_s": first_s - steps * statistics.median(steady_ms) / 1e3,  # the first steps less their steady time
        "artifacts_loaded": load.loaded if load is not None else None,
        "artifacts_load_s": load.seconds if load is not None else None,
        "step_s": [round(s, 3) for s in step_s],
        # the compiler's own clocks (Dynamo, AOTAutograd, Inductor, kernel loads): the rest of the first steps is
        # run-time work done once (cuDNN's algorithm search, CUDA graph recording, launcher builds)
        "compiler_clocks": {key: round(value, 2) for key, value in calculate_time_spent().items()},
        "triton_cache_files": _files_by_suffix(os.environ.get("TRITON_CACHE_DIR")),
        "inductor_cache_files": _files_by_suffix(os.environ.get("TORCHINDUCTOR_CACHE_DIR")),
        "fx_graph_cache_hits": counters["inductor"]["fxgraph_cache_hit"],
        # kernels timed by coordinate descent in this process: 0 when the shipped tuned block sizes were all taken
        "coordesc_benchmarks": counters["inductor"]["coordesc_tuning_bench"],
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": str(torch.__version__),
    }


def _files_by_suffix(folder: str | None) -> dict[str, int]:
    """How many files of each suffix a cache folder holds (Triton's: cubins, launchers; Inductor's)."""
    found: dict[str, int] = {}
    if not folder:
        return found
    for path in Path(folder).rglob("*"):
        if path.is_file():  # a file named by a hash alone counts under its top folder (Inductor's fxgraph/, ...)
            key = path.suffix or f"{path.relative_to(folder).parts[0]}/"
            found[key] = found.get(key, 0) + 1
    return found


# --- the parent: fresh processes, empty caches --------------------------------------------------------------------


def measure(tuned: Path, caches: Path, steps: int, steady: int, profile: Path | None = None) -> dict[str, Any]:
    """One run in a fresh process with ``caches``' folders; ``profile``: write its cProfile statistics there."""
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    }
    command = [sys.executable, __file__, "--child", str(tuned), "--steps", str(steps), "--steady", str(steady)]
    if profile is not None:  # where the start goes, function by function (the compile workers' time shows as waits)
        command[1:1] = ["-m", "cProfile", "-o", str(profile)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"a run of {tuned} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _profile(folder: Path | None, label: str) -> Path | None:
    if folder is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve() / f"{label}.pstats"


def without_artifacts(tuned: Path, folder: Path) -> Path:
    """``tuned`` with its compile_artifacts section removed (the same knobs, compiled from scratch)."""
    import yaml

    data = yaml.safe_load(tuned.read_text())
    if not data.get("compile_artifacts"):
        sys.exit(f"{tuned} ships no compile artifacts: export it again (autotune export --compile-artifacts)")
    data.pop("compile_artifacts")
    plain = folder / "without" / tuned.name
    plain.parent.mkdir(parents=True)
    plain.write_text(yaml.safe_dump(data, sort_keys=False))
    return plain


def variant(tuned: Path, changes: dict[str, str]) -> Path:
    """``tuned`` with some knobs changed, its artifacts kept (beside it): which part of the start a knob costs
    (e.g. ``cudnn_benchmark=false``: cuDNN's algorithm search), from the same compile."""
    import yaml

    data = yaml.safe_load(tuned.read_text())
    data["knobs"] = {**data["knobs"], **{key: yaml.safe_load(value) for key, value in changes.items()}}
    name = "-".join(f"{key}={value}" for key, value in changes.items()).replace("/", "_")
    changed = tuned.with_name(f"{tuned.stem}.{name}.yaml")
    changed.write_text(yaml.safe_dump(data, sort_keys=False))
    return changed


def capture(workload: str, preset: str, params: dict[str, str], device: str, folder: Path) -> Path:
    """One trial of the configuration (its artifacts saved), written as a tuned config with them beside it."""
    import yaml

    from autotune import knobs
    from autotune.jobspec import TrialSpec
    from autotune.runner import TrialRunner
    from autotune.tuned import artifacts as compileartifacts
    from autotune.tuned.config import TunedConfig

    spec = TrialSpec(workload, params, preset, device, compile_cache_dir=str(folder / "study-cache"))
    print(f"capturing: one trial of {workload} ({preset}) {params}", file=sys.stderr)
    result = TrialRunner().run(spec, 3600)
    saved = result.extra.get("compile_artifacts")
    if not result.ok or saved is None:
        sys.exit(f"the trial ended {result.status.value}: {result.reason or 'it saved no compile artifacts'}")
    # what the first steps cost without artifacts, as the trial measured it (its compile options are production's)
    print(f"captured: the trial's compile_s {result.metrics.get('compile_s')}", file=sys.stderr, flush=True)
    artifacts = compileartifacts.Artifacts.from_dict(saved, "the trial's compile artifacts")
    print(f"captured: {artifacts.bytes:,} bytes, entries {artifacts.entries}", file=sys.stderr, flush=True)
    source = folder / "study-cache" / compileartifacts.FOLDER / artifacts.file
    shipped = compileartifacts.read_verified(source, artifacts.sha256, "the trial's result")
    _kernel_census(folder / "study-cache" / "triton", shipped)
    tuned = folder / "tuned.yaml"
    name = compileartifacts.shipped_name(tuned)
    (folder / name).write_bytes(shipped)
    resolved = {k: v for k, v in result.params.items() if v is not None}
    config = TunedConfig(
        knobs={k: resolved[k] for k in knobs.KNOB_SPECS if k in resolved},
        params={k: v for k, v in resolved.items() if k not in knobs.KNOB_SPECS},
        workload={"name": workload, "preset": preset},
        kernels={path: chosen for path, chosen in result.kernels.items() if "by_shape" in chosen},  # as export does
        provenance={
            "env": json.loads(json.dumps(result.env)),  # plain strings (torch's version is a str subclass)
            "metrics": {"compile_s": result.metrics.get("compile_s")},
        },
        compile_artifacts={**artifacts.to_dict(), "file": name},
    )
    tuned.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
    return tuned


def _kernel_census(triton: Path, shipped: bytes) -> None:
    """What the capture's Triton folder holds beside what shipped: kernel folders, their bytes by suffix, and how
    many of them torch's bytes name (for a start that still builds kernels: which ones were left out, and why)."""
    from autotune.tuned import tritonfiles

    torch_data, files = tritonfiles.unpack(shipped, "the capture")
    kernels = [p for p in triton.iterdir() if p.is_dir() and any(p.glob("__grp__*.json"))] if triton.is_dir() else []
    by_suffix: dict[str, int] = {}
    for kernel in kernels:
        for path in kernel.iterdir():
            by_suffix[path.suffix] = by_suffix.get(path.suffix, 0) + path.stat().st_size
    named = sum(1 for k in kernels if k.name.encode() in torch_data)
    shipped_keys = {name.split("/")[0] for name in files}
    print(
        f"captured: {len(kernels)} kernel folders in the Triton folder ({named} named in torch's bytes, "
        f"{len(shipped_keys & {k.name for k in kernels})} shipped); their bytes by suffix {by_suffix}",
        file=sys.stderr,
        flush=True,
    )


def report(runs: dict[str, list[dict[str, Any]]], steps: int) -> list[str]:
    lines = [f"{'':8} first {steps} steps   compile   steady step   artifacts"]
    for label, found in runs.items():
        for run in found:
            loaded = {True: "loaded", False: "not loaded", None: "-"}[run["artifacts_loaded"]]
            lines.append(
                f"{label:8} {run['first_steps_s']:9.1f} s {run['compile_s']:7.1f} s {run['steady_step_ms']:9.2f} ms"
                f"   {loaded}"
            )
    best = {label: min(r["first_steps_s"] for r in found) for label, found in runs.items() if found}
    compile_with = min(r["compile_s"] for r in runs["with"])
    ratio = f"{best['with'] / best['without']:.2f}" if "without" in best else "(not run)"
    lines.append(
        f"with/without: {ratio} of the first steps' time; compile with the artifacts"
        f" {compile_with:.1f} s ({runs['with'][0]['device']}, torch {runs['with'][0]['torch']})"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tuned", nargs="?", type=Path, help="a tuned config with its compile artifacts beside it")
    parser.add_argument("--workload", help="capture one configuration first: a workload (gpt2, resnet50, mod:fn)")
    parser.add_argument("--preset", default="full")
    parser.add_argument("-p", dest="params", action="append", default=[], help="key=value of the configuration")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--steps", type=int, default=3, help="first steps timed (compile included)")
    parser.add_argument("--steady", type=int, default=5, help="steps after them, for the steady step time")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each, alternating")
    parser.add_argument(
        "--with-first", action="store_true", help="run 'with' before 'without' (a slow 'without' may be cut off)"
    )
    parser.add_argument("--warm", action="store_true", help="also a run reusing the 'with' run's cache folders")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="also a 'with' run with these knobs changed (the same artifacts): what a knob costs at the start",
    )
    parser.add_argument("--skip-without", action="store_true", help="no run without the artifacts (a long compile)")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    parser.add_argument("--profile", type=Path, help="a folder: each run's cProfile statistics, LABEL.pstats")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_once(str(args.tuned), args.steps, args.steady)))
        return
    if (args.tuned is None) == (args.workload is None):
        parser.error("give a tuned config, or --workload with -p key=value")
    with tempfile.TemporaryDirectory(prefix="autotune-artifacts-") as tmp:
        folder = Path(tmp)
        if args.workload:
            params = dict(pair.split("=", 1) for pair in args.params)
            tuned = capture(args.workload, args.preset, params, args.device, folder)
        else:
            tuned = args.tuned.resolve()
        plain = without_artifacts(tuned, folder)
        runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
        order: tuple[str, ...] = ("with", "without") if args.with_first else ("without", "with")
        order = tuple(label for label in order if not (args.skip_without and label == "without"))
        for repeat in range(args.repeats):
            for label in order:
                run = measure(
                    tuned if label == "with" else plain,
                    folder / f"caches-{label}-{repeat}",
                    args.steps,
                    args.steady,
                    _profile(args.profile, f"{label}-{repeat}"),
                )
                print(f"{label}: {json.dumps(run)}", file=sys.stderr, flush=True)  # a cut-off benchmark keeps it
                runs[label].append(run)
        for number, changes in enumerate(args.variant):
            changed = variant(tuned, dict(pair.split("=", 1) for pair in changes.split(",")))
            run = measure(changed, folder / f"caches-variant-{number}", args.steps, args.steady)
            print(f"with {changes}: {json.dumps(run)}", file=sys.stderr, flush=True)
            runs[f"with {changes}"] = [run]
        if args.warm:
            runs["warm"] = [
                measure(tuned, folder / "caches-with-0", args.steps, args.steady, _profile(args.profile, "warm"))
            ]
            print(f"warm: {json.dumps(runs['warm'][0])}", file=sys.stderr, flush=True)
        print(json.dumps(runs, indent=2) if args.json else "\n".join(report(runs, args.steps)))


if __name__ == "__main__":
    main()
