"""A trial's Triton autotuning: each round's configs compiled in parallel first, and the rounds' time kept.

A ``triton.autotune`` kernel that meets a new shape key benchmarks its configs one by one, and compiles each
inside that loop, the first time it is benchmarked: one compile after another, on one core, while the GPU waits.
GPT-2's fused LM head has 34 configs; on an H200 a sweep's first trial in each dtype (bf16, fp16, fp32) spent
14-18 s more in its first step than the compiler's clocks account for (BENCHMARKS.md).
Compiling needs no GPU, and Triton's compiler lets go of the GIL in its heavy parts (the MLIR and LLVM passes,
ptxas): with no GPU, the head's round of 34 bf16 configs for sm_90 compiled in 7.9 s one after another and in
4.8 s in the two threads of the 2-core development machine (Triton 3.6; ``scripts/autotune_compile_round.py``).

So in a trial (:func:`begin_trial`), an autotuner about to benchmark a round of configs first compiles all of them
in a pool of threads (:func:`compile_threads`) under Triton's ``AsyncCompileMode``, then benchmarks them one at a
time as before: the same configs, timed the same way on the same values, so the choice is Triton's own; only the
compiles overlap. A config whose compile fails there is compiled again, alone, when it is benchmarked, where
Triton meets the failure as it always did (a config that cannot run is never chosen). Left to compile in their
benchmarks: a config with a ``pre_hook``, and every config of an autotuner with its own ``pre_hook`` (a hook may
set what the kernel is specialized on, such as a tensor descriptor's block shape: compiled before it, the kernel
would be compiled for the wrong one). Left as they were: a kernel under Triton's CPU interpreter (nothing is
compiled), a round that the autotuner's disk cache answers (nothing is benchmarked), a kernel of one config, a
process with one core, and a Triton without ``AsyncCompileMode``. Production's ``apply()`` does not install it:
there the kernels launch the configs the trial chose (:mod:`autotune.kernels.choices`).

The hooks are the autotuner's own steps, wrapped on its class: ``prune_configs`` (the round's configs, once per
new shape key) and ``_bench`` (one config's benchmark; the round's first call compiles them all). Both have kept
their signatures from Triton 3.0 to 3.9; where either is missing, nothing is installed.

The trial's rounds are timed (:func:`autotuning_time`) and recorded (:func:`autotuning_metrics`):
``kernel_autotune_s``, the rounds, compiles and benchmarks, wherever the trial ran them (nearly always its first
steps: one-off work, so part of its ``compile_s``), and ``kernel_autotune_compile_s``, the parallel compiles in them.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from autotune.kernels.listing import wrapped
from autotune.measurement import AUTOTUNE_COMPILE_METRIC, AUTOTUNE_METRIC

__all__ = [
    "AutotuningTime",
    "autotuning_metrics",
    "autotuning_time",
    "begin_trial",
    "compile_threads",
    "install",
    "installed",
    "uninstall",
]

_ROUND = "_autotune_round"  # the autotuner's attribute holding the configs its next benchmark compiles first


@dataclass(frozen=True)
class AutotuningTime:
    """A trial's autotuning rounds: how many, their seconds in all (compiles and benchmarks; a compile not done in
    parallel is part of its config's benchmark), and the part compiling their configs in parallel."""

    rounds: int = 0
    seconds: float = 0.0
    compile_s: float = 0.0

    def plus(self, *, rounds: int = 0, seconds: float = 0.0, compile_s: float = 0.0) -> AutotuningTime:
        return AutotuningTime(self.rounds + rounds, self.seconds + seconds, self.compile_s + compile_s)


_lock = threading.Lock()  # a workload may launch kernels from several threads
_time = AutotuningTime()
_originals: dict[str, Callable[..., Any]] = {}  # the autotuner class's own methods, while installed


def compile_threads(configs: int) -> int:
    """Threads for a round of ``configs`` compiles: one per core this process may use, at most one per config.

    All of them: the trial's GPU waits for the round, and compiles ahead of other trials run at a lower priority."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(configs, cores))


def begin_trial() -> bool:
    """Install the hooks (:func:`install`) and count this trial's rounds from zero; False where Triton cannot."""
    global _time
    with _lock:
        _time = AutotuningTime()
    return install()


def install() -> bool:
    """Make every ``triton.autotune`` kernel of this process compile a round's configs in parallel before it
    benchmarks them, and time its rounds; idempotent. False where this Triton lacks what it needs (nothing is
    changed then)."""
    try:
        from triton import AsyncCompileMode  # noqa: F401  (Triton 3.4 and later)
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    if _originals:
        return True
    if not all(callable(getattr(Autotuner, name, None)) for name in ("prune_configs", "_bench")):
        return False
    prune, bench = Autotuner.prune_configs, Autotuner._bench
    _originals.update(prune_configs=prune, _bench=bench)

    def prune_configs(self: Any, kwargs: dict[str, Any]) -> Any:
        configs = prune(self, kwargs)
        setattr(self, _ROUND, list(configs))  # compiled at the round's first benchmark, if one comes
        return configs

    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
        configs = self.__dict__.pop(_ROUND, None)
        started = time.perf_counter()
        if configs is not None:
            _begin_round(self, configs, args, meta)
        try:
            return bench(self, *args, config=config, **meta)
        finally:
            _add(seconds=time.perf_counter() - started)

    Autotuner.prune_configs = prune_configs
    Autotuner._bench = _bench
    return True


def installed() -> bool:
    """Whether the hooks are on in this process."""
    return bool(_originals)


def uninstall() -> None:
    """Give the autotuner class its own methods back (tests; a trial process keeps them installed)."""
    if not _originals:
        return
    from triton.runtime.autotuner import Autotuner

    Autotuner.prune_configs = _originals.pop("prune_configs")
    Autotuner._bench = _originals.pop("_bench")


def autotuning_time() -> AutotuningTime:
    """This trial's autotuning rounds so far (this process's, where no trial began)."""
    with _lock:
        return _time


def autotuning_metrics() -> dict[str, float]:
    """``kernel_autotune_s`` and ``kernel_autotune_compile_s`` of this trial's rounds; {} where no kernel
    benchmarked its configs (none was unpinned, or its disk cache answered)."""
    spent = autotuning_time()
    if not spent.rounds:
        return {}
    return {AUTOTUNE_METRIC: spent.seconds, AUTOTUNE_COMPILE_METRIC: spent.compile_s}


def _add(*, rounds: int = 0, seconds: float = 0.0, compile_s: float = 0.0) -> None:
    """Add to the trial's rounds (from any thread that launches a kernel)."""
    global _time
    with _lock:
        _time = _time.plus(rounds=rounds, seconds=seconds, compile_s=compile_s)


def _begin_round(autotuner: Any, configs: Sequence[Any], args: tuple[Any, ...], meta: dict[str, Any]) -> None:
    """Count the round, and compile its configs in parallel where that can help (the time is the round's)."""
    _add(rounds=1)
    ahead = [config for config in configs if config.pre_hook is None]  # a hook may change what is compiled
    threads = compile_threads(len(ahead))
    if threads < 2 or getattr(autotuner, "user_defined_pre_hook", False) or not _compiled_by_triton(autotuner):
        return
    started = time.perf_counter()
    if _compile_all(autotuner, ahead, args, meta, threads):
        _add(compile_s=time.perf_counter() - started)


def _compiled_by_triton(autotuner: Any) -> bool:
    """Whether the kernel under the autotuner (and any ``triton.heuristics``) is Triton's JIT, not the CPU
    interpreter's function, which compiles nothing."""
    from triton.runtime.jit import JITFunction

    return wrapped(autotuner.fn, JITFunction) is not None


def _compile_all(
    autotuner: Any, configs: Sequence[Any], args: tuple[Any, ...], meta: dict[str, Any], threads: int
) -> bool:
    """Compile each config as its benchmark will launch it (``warmup``: compiled, not run), ``threads`` at a time;
    False where another ``AsyncCompileMode`` is active (the benchmarks then compile as they always did)."""
    from triton import AsyncCompileMode

    compile_only = {**meta, "warmup": True}
    # The mode is left before the pool: leaving it waits for every compile, a failed one left to its benchmark.
    with ThreadPoolExecutor(threads, thread_name_prefix="autotune-compile") as pool, contextlib.ExitStack() as mode:
        try:
            mode.enter_context(AsyncCompileMode(pool, ignore_errors=True))
        except RuntimeError:  # the workload's own async compile is on: leave the compiles to it
            return False
        for config in configs:
            if compile_only.keys() & config.kwargs.keys():
                continue  # a conflict of meta-parameters: its benchmark raises Triton's own error
            with contextlib.suppress(Exception):  # the config meets its failure when it is benchmarked
                autotuner.fn.run(*args, **dict(compile_only, **config.all_kwargs()))  # merged as _bench merges them
    return True
