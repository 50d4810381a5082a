"""Where a trial's set-up goes: one trial run in this process as a forked trial runs, its phases timed.

    python3 scripts/trial_setup.py WORKLOAD PARAMS_JSON [--preset full] [--device cuda] [--cache DIR] [--top N]
                                   [--whole]
    python3 scripts/trial_setup.py --imports MODULE [MODULE ...]

The trial server's imports (``autotune.trial_process.PRELOAD``) come first and are not counted: a forked trial has them.
The trial then runs with a pruning bar no configuration reaches, so one with one-off work (a compile, cuDNN's search)
stops after its eager probe, before it compiles, and one without stops after its warm-up. Printed: the trial's
``setup_s``, the cumulative seconds of each step of its set-up and of the eager probe (read from a profile of the
run, so nothing is patched), and the ``--top`` functions by cumulative time. Run it twice with one ``--cache`` folder
to see what a repeat of a configuration costs (the study's compile caches are that folder's).

``--whole`` runs the trial to its end instead, with no pruning bar (its compile and measurement included), and
prints PyTorch's own compile timers (``torch._dynamo.utils.compile_times``: seconds in each timed phase of Dynamo,
AOTAutograd and Inductor, cache loads included; printed as a flat list, though the timed functions nest: an outer
phase's figure includes the inner ones') beside the profile: where a repeat's compile goes.

``--imports`` times importing each MODULE after the trial server's imports, in order, and says after each whether
CUDA was initialized, which threads run, and whether a child forked then can use CUDA (the check that decides: a
forked trial cannot use CUDA its parent initialized, and a module the server could import too must leave that so).

An H100 example (the informed start of ``gpt2.yaml``, then its repeat)::

    d=$(mktemp -d); p='{"batch_size": 64, "precision": "bf16", "compile_mode": "default",
        "fused_optimizer": true, "head": "fused"}'
    for i in 1 2; do PYTHONPATH=$PWD python3 scripts/trial_setup.py gpt2 "$p" --cache $d; done
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import os
import pstats
import signal
import threading
import time

from autotune.trial_process import PRELOAD

# (file suffix, function) of each set-up step, in the order a trial takes them (autotune/trial/job.py, training.py).
STEPS = [
    ("trial/job.py", "use_study_cache"),
    ("trial/artifacts_io.py", "load_before_compile"),
    ("kernels/listing.py", "load_kernel"),
    ("kernels/pinning.py", "pin_all"),
    ("workloads/__init__.py", "build"),
    ("trial/numerics.py", "reference_pass"),
    ("knobs/applying.py", "apply"),
    ("trial/eagerprobe.py", "probe_before_work"),
]


def _preload() -> float:
    started = time.perf_counter()
    for module in PRELOAD:
        importlib.import_module(module)
    return time.perf_counter() - started


def time_imports(modules: list[str]) -> None:
    preload_s = _preload()
    import torch  # imported by the preload already

    print(
        f"trial server's imports: {preload_s:.2f} s, CUDA initialized: {torch.cuda.is_initialized()},"
        f" a forked trial: {_forked_child_uses_cuda()}"
    )
    for module in modules:
        started = time.perf_counter()
        importlib.import_module(module)
        threads = sorted(thread.name for thread in threading.enumerate())
        print(
            f"import {module}: {time.perf_counter() - started:.2f} s, CUDA initialized: {torch.cuda.is_initialized()},"
            f" threads: {threads}, a forked trial: {_forked_child_uses_cuda()}"
        )


def _forked_child_uses_cuda() -> str:
    """Fork as the trial server does and use CUDA in the child: what decides whether a preload is safe. The parent's
    own flags cannot say it all (a driver call that does not count as initializing can still spoil fork)."""
    pid = os.fork()
    if pid == 0:
        os._exit(_child_cuda_check())
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return f"killed by signal {-code}"
    return {0: "uses CUDA", 2: "no GPU here"}.get(code, "CANNOT use CUDA")


def _child_cuda_check() -> int:
    """In the forked child: 0 when the device check a ``--gpus`` worker runs before each trial passes
    (:func:`autotune.sweep.workers.device_check.probe`: the device initialises, small kernels give the right numbers), 2
    without a GPU, 1 when it fails (its line on stderr). Never returns by an exception: the caller exits at once, so the
    child never runs on in the parent's code."""
    signal.alarm(60)  # a child deadlocked by a lock some parent thread held at fork ends, reported as a signal
    try:
        import torch

        from autotune.sweep.workers.device_check import probe

        if not torch.backends.cuda.is_built() or not os.path.exists("/dev/nvidiactl"):
            return 2  # decided without the CUDA runtime, which a spoilt fork would make answer "no GPU"
        problem = probe("cuda")
    except BaseException as error:  # Ctrl-C included: the child must not run on
        problem = f"{type(error).__name__}: {error}"
    if problem is None:
        return 0
    os.write(2, f"forked child: {problem}\n".encode())
    return 1


def _step_seconds(stats: pstats.Stats) -> list[tuple[str, float]]:
    found = []
    table = stats.stats  # type: ignore[attr-defined]  # {(file, line, function): (calls, ..., cumulative, callers)}
    for suffix, function in STEPS:
        seconds = sum(row[3] for (path, _, name), row in table.items() if name == function and path.endswith(suffix))
        found.append((f"{suffix}:{function}", seconds))
    return found


def profile_trial(
    workload: str, params: dict[str, object], preset: str, device: str, cache: str, top: int, whole: bool = False
) -> None:
    print(f"trial server's imports: {_preload():.2f} s (not counted below)")
    from autotune.trial.job import run_trial
    from autotune.trial.pruning import Pruning
    from autotune.trial.trialspec import TrialSpec

    unreachable = Pruning(below=float("inf"), compile_gain=1.0, basis="scripts/trial_setup.py")
    spec = TrialSpec(workload, params, preset, device, compile_cache_dir=cache, pruning=None if whole else unreachable)
    profile = cProfile.Profile()
    started = time.time()
    profile.enable()
    result = run_trial(spec, started)
    profile.disable()
    setup = result.metrics.get("setup_s")  # a pruned trial's metrics leave it out: the steps below still add up
    recorded = f"; setup_s {setup:.2f}" if setup is not None else ""
    print(f"{result.status.value} in {time.time() - started:.2f} s{recorded}")
    if result.reason:
        print(f"  reason: {result.reason}")
    if whole:
        _print_compile(result.metrics)
    stats = pstats.Stats(profile)
    for step, seconds in _step_seconds(stats):
        print(f"  {step:40s} {seconds:7.2f} s")
    if top:
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(top)
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip()))


def _print_compile(metrics: dict[str, float]) -> None:
    """The trial's compile figures and torch's timers by phase (cumulative for this process: one trial ran)."""
    from torch._dynamo.utils import compile_times

    recorded = {name: round(float(value), 2) for name, value in metrics.items() if name.startswith("compile")}
    print(f"  recorded: {recorded}, throughput {metrics.get('throughput', 0):,.1f}")
    timers = compile_times(repr="csv", aggregate=True)  # (names, seconds as text), each a phase's total over its calls
    assert isinstance(timers, tuple)
    names, seconds = timers
    # Each timer is one function's wall time, and timed functions call one another (Dynamo's tracing and the
    # compiler call inside _compile): the list is flat, so its figures overlap and do not add up.
    print("  torch's compile timers (seconds, all calls; they nest, so they overlap and do not add up):")
    phases = zip(names, (float(str(value)) for value in seconds), strict=True)
    for name, spent in sorted(phases, key=lambda row: -row[1]):
        print(f"    {name:60s} {spent:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?")
    parser.add_argument("params", nargs="?", help="the trial's params, a JSON object")
    parser.add_argument("--preset", default="full")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cache", help="the study's compile-cache folder (default: a new one)")
    parser.add_argument("--top", type=int, default=25, help="functions to print by cumulative time (0: none)")
    parser.add_argument("--whole", action="store_true", help="run the trial through, print torch's compile timers")
    parser.add_argument("--imports", nargs="+", metavar="MODULE", help="time these imports instead of a trial")
    args = parser.parse_args()
    if args.imports:
        time_imports(args.imports)
        return
    if not args.workload or not args.params:
        parser.error("WORKLOAD and PARAMS_JSON are needed (or --imports)")
    import tempfile

    cache = args.cache or tempfile.mkdtemp(prefix="trial-setup-")
    profile_trial(args.workload, json.loads(args.params), args.preset, args.device, cache, args.top, args.whole)


if __name__ == "__main__":
    main()
