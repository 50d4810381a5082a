"""A production start, with and without a tuned config's compile artifacts: fresh processes, empty compile caches.

    # a config exported after a sweep (beside it: tuned.compile-artifacts.bin)
    python scripts/compile_artifacts_benchmark.py tuned.yaml [--steps 3] [--repeats 1] [--with-first] [--warm] [--json]
    # or one configuration, captured first by one trial on this machine (here GPT-2's):
    python scripts/compile_artifacts_benchmark.py --workload gpt2 --preset full \\
        -p precision=bf16 -p compile_mode=default -p fused_optimizer=true -p batch_size=32

Each run is a fresh Python process with empty Inductor and Triton cache folders (TORCHINDUCTOR_CACHE_DIR,
TRITON_CACHE_DIR) that loads the config, builds the workload's model and batches, and times
``cfg.apply(model, optimizer)`` plus the first ``--steps`` training steps (compile included, the device
synchronised), then the steady step (median of ``--steady`` more). "without" applies the same file with its
``compile_artifacts`` section removed; "with" applies it as it is (apply() loads the artifacts); ``--warm`` adds
a run that reuses the "with" run's cache folders, the best a restart on the same machine can do. The runs
alternate without/with when ``--repeats`` > 1. The targets: the first steps with the artifacts at most
0.7 of those without on a CPU, and compile (first steps less their steady time) at most 10 s for the GPT-2
and ResNet-50 winners on a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


# --- one run: what production does, timed (in its own process) --------------------------------------------------


def run_once(tuned: str, steps: int, steady: int) -> dict[str, Any]:
    """Production's start (:func:`autotune.trial.firststeps.run`) and where its time went."""
    import torch
    from torch._dynamo.utils import calculate_time_spent, counters

    from autotune.trial import firststeps

    tuned_again = _watch_coordinate_descent()  # which kernels tune again at the start, and what their cache held
    start = firststeps.run(tuned, "auto", steps, steady)
    return {
        **dataclasses.asdict(start),  # start_s: apply() and the first steps, less their steady time
        # the compiler's own clocks (Dynamo, AOTAutograd, Inductor, kernel loads): the rest of the first steps is
        # run-time work done once (cuDNN's algorithm search, CUDA graph recording, launcher builds)
        "compiler_clocks": {key: round(value, 2) for key, value in calculate_time_spent().items()},
        "triton_cache_files": _files_by_suffix(os.environ.get("TRITON_CACHE_DIR")),
        "inductor_cache_files": _files_by_suffix(os.environ.get("TORCHINDUCTOR_CACHE_DIR")),
        "fx_graph_cache_hits": counters["inductor"]["fxgraph_cache_hit"],
        # kernels timed by coordinate descent in this process: 0 when the shipped tuned block sizes were all taken
        "coordesc_benchmarks": counters["inductor"]["coordesc_tuning_bench"],
        "tuned_again": tuned_again,
        "ptxas": _ptxas_in_keys(),
        "torch": str(torch.__version__),
    }


def _ptxas_in_keys() -> dict[str, Any]:
    """The ptxas this process's Triton keys name (:mod:`autotune.knobs.assembler`): the variable, and the version the
    compile artifacts record for the device (:func:`autotune.tuned.artifacts.environment`; none on a CPU)."""
    import torch

    from autotune.tuned import artifacts as compileartifacts

    device = "cuda" if torch.cuda.is_available() else "cpu"
    version = compileartifacts.environment(device).get("ptxas")
    return {"TRITON_PTXAS_PATH": os.environ.get("TRITON_PTXAS_PATH"), "version": version}


def _watch_coordinate_descent() -> list[dict[str, Any]]:
    """A list that fills, as the start runs, with each kernel Inductor's coordinate descent tunes: its name, the
    state of its autotune cache when it was made, the config it starts from, and what its cache file holds (a
    start from artifacts that hold every tuned result should tune none). Empty where Inductor has no such hook."""
    seen: list[dict[str, Any]] = []
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:
        return seen
    original = getattr(CachingAutotuner, "coordinate_descent_tuning", None)
    if original is None:
        return seen

    def watched(self: Any, launcher: Any, *args: Any, **kwargs: Any) -> Any:
        config = launcher.config
        cache = getattr(getattr(self, "save_cache_hook", None), "__self__", None)
        local = getattr(cache, "local_cache", None)
        stored: Any = None
        if local:
            try:
                stored = json.loads(Path(local[1]).read_text())
            except (OSError, ValueError):
                stored = "missing"
        seen.append(
            {
                "kernel": self.inductor_meta.get("kernel_name"),
                "cache_info": {k: str(v) for k, v in (getattr(self, "autotune_cache_info", None) or {}).items()},
                "start": {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages},
                "start_found_by_coordesc": getattr(config, "found_by_coordesc", None),
                "configs_hash": getattr(cache, "configs_hash", None),
                "stored": stored,
            }
        )
        return original(self, launcher, *args, **kwargs)

    CachingAutotuner.coordinate_descent_tuning = watched  # type: ignore[method-assign]
    return seen


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


def measure(
    tuned: Path, caches: Path, steps: int, steady: int, profile: Path | None = None, inductor: str = "inductor"
) -> dict[str, Any]:
    """One run in a fresh process with ``caches``' folders; ``profile``: write its cProfile statistics there;
    ``inductor``: the name of Inductor's folder in ``caches``."""
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(caches / inductor),
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
    from autotune.trial.trialspec import TrialSpec
    from autotune.trial_process import TrialRunner
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


def keep(tuned: Path, folder: Path) -> None:
    """Copy ``tuned`` and the artifacts it ships into ``folder`` (a capture costs minutes; its starts, seconds)."""
    import shutil

    from autotune.tuned import artifacts as compileartifacts

    folder.mkdir(parents=True, exist_ok=True)
    shipped = compileartifacts.shipped_name(tuned)  # the name capture() wrote them under
    for path in (tuned, tuned.parent / shipped):
        shutil.copy2(path, folder / path.name)
    print(f"kept: {tuned.name} and {shipped} in {folder}", file=sys.stderr, flush=True)


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


def rehearsed_config(tuned: Path, folder: Path) -> Path:
    """``tuned`` shipping what a rehearsal of its production start saved
    (:func:`autotune.sweep.stages.rehearsal.rehearse`, as a sweep's finishing stage runs it), written in ``folder /
    "rehearsed"``."""
    import yaml

    from autotune.sweep.stages.rehearsal import rehearse
    from autotune.tuned import artifacts as compileartifacts

    print("rehearsing the start: a fresh process, empty caches, the artifacts loaded", file=sys.stderr)
    kept = folder / "rehearsal" / compileartifacts.FOLDER
    rehearsal = rehearse(tuned, kept, "auto", 3600.0)
    print(f"rehearsed: {json.dumps(rehearsal.to_dict())}", file=sys.stderr, flush=True)
    if rehearsal.artifacts is None:
        sys.exit(f"the rehearsal ended {rehearsal.status}: {rehearsal.reason or 'it saved no compile artifacts'}")
    saved = compileartifacts.Artifacts.from_dict(rehearsal.artifacts, "the rehearsal's artifacts")
    target = folder / "rehearsed" / tuned.name
    target.parent.mkdir(parents=True)
    name = compileartifacts.shipped_name(target)
    (target.parent / name).write_bytes((kept / saved.file).read_bytes())
    data = yaml.safe_load(tuned.read_text())
    data["compile_artifacts"] = {**saved.to_dict(), "file": name}
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def kernel_differences(before: Path, after: Path) -> dict[str, Any]:
    """The kernel folders of Triton's cache ``after`` whose keys ``before`` lacks (built anew), and how each differs
    from the nearest kernel of the same name in ``before``: its metadata's fields (Triton's options, the env
    variables in its key), its TTIR but for source file names (code, constants, specialisation), or neither (the
    key's other parts: a constant the code does not use, the source's line, the backend)."""
    old, new = _kernels(before), _kernels(after)
    built = {key: path for key, path in new.items() if key not in old}
    by_name: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for path in old.values():
        meta = _metadata(path)
        by_name.setdefault(str(meta.get("name")), []).append((meta, _ttir(path)))
    fields: dict[str, int] = {}
    examples: list[dict[str, Any]] = []
    same_name = ttir_differs = identical = 0
    for path in built.values():
        meta, ttir = _metadata(path), _ttir(path)
        candidates = by_name.get(str(meta.get("name")), [])
        if not candidates:
            continue
        same_name += 1
        nearest, nearest_ttir = min(candidates, key=lambda c: (len(_fields_differing(meta, c[0])), c[1] != ttir))
        differing = _fields_differing(meta, nearest)
        for name in differing:
            fields[name] = fields.get(name, 0) + 1
        ttir_differs += ttir != nearest_ttir
        identical += not differing and ttir == nearest_ttir
        if len(examples) < 4 and (differing or ttir != nearest_ttir):
            examples.append(
                {
                    "name": meta.get("name"),
                    "fields": {name: [meta.get(name), nearest.get(name)] for name in differing},
                    "ttir": _first_difference(ttir, nearest_ttir),
                }
            )
    return {
        "kernels": len(new),
        "built_anew": len(built),
        "same_name_before": same_name,
        "fields_differing": fields,
        "ttir_differs": ttir_differs,
        "metadata_and_ttir_identical": identical,
        "examples": examples,
    }


def _kernels(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.name: p for p in folder.iterdir() if p.is_dir() and any(p.glob("__grp__*.json"))}


def _metadata(kernel: Path) -> dict[str, Any]:
    for path in kernel.glob("*.json"):
        if not path.name.startswith("__grp__"):
            try:
                return dict(json.loads(path.read_text()))
            except ValueError:
                return {}
    return {}


def _ttir(kernel: Path) -> str:
    """The kernel's TTIR with its source locations' file names left out (a trial's Inductor folder is not
    production's): what differs then is the code, its constants or its specialisation."""
    text = "\n".join(path.read_text(errors="replace") for path in sorted(kernel.glob("*.ttir")))
    return re.sub(r'loc\("[^"]*"', 'loc("<file>"', text)


def _fields_differing(one: dict[str, Any], other: dict[str, Any]) -> list[str]:
    return sorted(name for name in one.keys() | other.keys() if name != "hash" and one.get(name) != other.get(name))


def _first_difference(one: str, other: str) -> list[str] | None:
    for line, (a, b) in enumerate(zip(one.splitlines(), other.splitlines(), strict=False)):
        if a != b:
            return [f"line {line + 1}", a[:300], b[:300]]
    return None if one == other else ["lengths differ", str(len(one)), str(len(other))]


def report(runs: dict[str, list[dict[str, Any]]], steps: int) -> list[str]:
    lines = [f"{'':8} first {steps} steps   compile   steady step   artifacts"]
    for label, found in runs.items():
        for run in found:
            loaded = {True: "loaded", False: "not loaded", None: "-"}[run["artifacts_loaded"]]
            lines.append(
                f"{label:8} {run['first_steps_s']:9.1f} s {run['start_s']:7.1f} s {run['steady_step_ms']:9.2f} ms"
                f"   {loaded}"
            )
    best = {label: min(r["first_steps_s"] for r in found) for label, found in runs.items() if found}
    compile_with = min(r["start_s"] for r in runs["with"])
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
    parser.add_argument(
        "--rehearse",
        action="store_true",
        help="rehearse the start as a sweep does (autotune.sweep.stages.rehearsal); a run then ships what that saved",
    )
    parser.add_argument(
        "--inductor-folder",
        action="append",
        default=[],
        metavar="NAME",
        help="also a 'with' run whose Inductor folder has this name (a trial's: inductor-bfloat16)",
    )
    parser.add_argument("--kernel-report", type=Path, help="a JSON file: the Triton kernels each start built anew")
    parser.add_argument(
        "--keep", type=Path, help="a folder: the captured tuned config and its artifacts, to time again later"
    )
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
            if args.keep:
                keep(tuned, args.keep)
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
        if args.rehearse:
            rehearsed = rehearsed_config(tuned, folder)
            run = measure(rehearsed, folder / "caches-rehearsed", args.steps, args.steady)
            print(f"rehearsed: {json.dumps(run)}", file=sys.stderr, flush=True)
            runs["rehearsed"] = [run]
        for name in args.inductor_folder:
            run = measure(tuned, folder / f"caches-{name}", args.steps, args.steady, inductor=name)
            print(f"with Inductor's folder {name}: {json.dumps(run)}", file=sys.stderr, flush=True)
            runs[f"with, {name}"] = [run]
        if args.kernel_report:
            pairs = [
                ("with, against the trial", folder / "study-cache", "with-0"),
                ("rehearsed, against with", folder / "caches-with-0", "rehearsed"),
                ("rehearsed, against the trial", folder / "study-cache", "rehearsed"),
            ]
            for name in args.inductor_folder:
                pairs += [
                    (f"{name}, against the trial", folder / "study-cache", name),
                    (f"{name}, against with", folder / "caches-with-0", name),
                ]
            kernels = {
                label: kernel_differences(earlier / "triton", folder / f"caches-{later}" / "triton")
                for label, earlier, later in pairs
                if (folder / f"caches-{later}").is_dir() and (earlier / "triton").is_dir()
            }
            args.kernel_report.write_text(json.dumps(kernels, indent=1, default=str))
            print(f"kernels: {json.dumps(kernels, default=str)[:4000]}", file=sys.stderr, flush=True)
        if args.warm:
            runs["warm"] = [
                measure(tuned, folder / "caches-with-0", args.steps, args.steady, _profile(args.profile, "warm"))
            ]
            print(f"warm: {json.dumps(runs['warm'][0])}", file=sys.stderr, flush=True)
        print(json.dumps(runs, indent=2) if args.json else "\n".join(report(runs, args.steps)))


if __name__ == "__main__":
    main()
