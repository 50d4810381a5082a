"""Everything that runs inside a trial's process: build the workload, apply the knobs, warm up, time, check the
numerics, profile; one :class:`~autotune.measurement.TrialResult` out.

Its interface with the parent is :mod:`autotune.jobspec` (what to run, in) and :mod:`autotune.measurement` (what
happened, out); the parent's side of a trial is :mod:`autotune.trial_process`. It may import the knobs, the workloads,
the data path and the kernels, never optuna, mlflow, the sweep or the views
(``tests/trial/test_trial_imports.py`` checks), so a trial job stays testable alone and
``autotune trial`` reuses it.

- ``job``: the entry (:func:`~autotune.trial.job.run_trial`): a spec in, a result out, failures classified.
- ``training``: measuring a training step; ``trainstep``: the step itself; ``warmup``: warming up until it
  settles; ``measure``: timing and telemetry; ``numerics``: the loss guard; ``eagerprobe``: a compiled trial's
  eager twin, timed before it compiles.
- ``failures``: an exception -> a failure class. ``compilecache``: the study's Inductor/Triton cache folder;
  ``compilephases``: where a compiled trial's compile went, by the compiler's own clocks.
- ``firststeps``: not a trial but a production start in its own process (a tuned config applied, its first steps
  timed, what it compiled saved): the sweep's rehearsal of the winner's start, and the start benchmark.
- ``profiler``: torch.profiler over a few steps; ``profile_breakdown`` and ``kernel_categories``: its events
  -> ms per step by category.
"""
