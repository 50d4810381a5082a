"""Where a compiled trial's compile went, by the compiler's own clocks: tracing, Inductor, kernel builds.

A trial's ``compile_s`` is what its first steps took above the steady step
(:func:`autotune.trial.warmup.compile_seconds`): the compile plus whatever else the first steps do once
(Triton autotuning, CUDA graph capture, cuDNN's algorithm search). To make a sweep's compiling cheaper one
must know which part costs, so a compiled trial also records what PyTorch's compiler timed in its process
(``torch._dynamo.utils.calculate_time_spent``):

- ``compile_wall_s``: the compiler's wall time, forward frame and backward together (Dynamo and AOTAutograd
  tracing, partitioning, Inductor);
- ``compile_inductor_s``: the part in Inductor (lowering, scheduling, code generation, kernel builds);
- ``compile_kernel_wait_s``: time spent waiting for Inductor's worker processes to build kernels (Triton and
  ptxas on a GPU, C++ on a CPU), or to load them where a graph came from the compile cache: the builds are
  what a cache shared between trials saves.

``compile_s`` less ``compile_wall_s`` is then the first steps' work outside the compiler. The counters are
private to PyTorch and cumulative for the process (a trial process compiles one configuration); a phase
that did not run reads 0 (a graph from the compile cache skips Inductor), and without the counters, or before
any compile, nothing is recorded.
"""

from __future__ import annotations

from autotune.measurement import COMPILE_PHASE_METRICS

__all__ = ["PHASES", "compile_phases"]

# Our metric -> the key of torch._dynamo.utils.calculate_time_spent() it reads (read off torch 2.13).
PHASES = dict(zip(COMPILE_PHASE_METRICS, ("total_wall_time", "inductor_compile", "async_compile.wait"), strict=True))


def compile_phases() -> dict[str, float]:
    """This process's compile time by phase (seconds), as :data:`PHASES` names them; {} before any compile."""
    try:
        from torch._dynamo.utils import calculate_time_spent
    except ImportError:  # a torch without Dynamo's counters: the trial's compile_s still says the whole
        return {}
    spent = calculate_time_spent()
    if not spent.get("total_wall_time"):
        return {}
    return {metric: float(spent.get(key, 0.0)) for metric, key in PHASES.items()}
