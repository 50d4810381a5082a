"""Everything that runs inside a trial's process: build the workload, apply the knobs, warm up, time, check the
numerics, profile; one :class:`~autotune.measurement.TrialResult` out.

Its interface with the parent is :mod:`autotune.trial.trialspec` (what to run, in; plain data, no torch) and
:mod:`autotune.measurement` (what happened, out); the parent's side of a trial is :mod:`autotune.trial_process`. It
may import the knobs, the workloads, the data path, the kernels and the profiler, never optuna, mlflow, the sweep or
the views (``tests/trial/test_trial_imports.py`` checks), so a trial job stays testable alone and ``autotune trial``
reuses it.

A trial's spec flows one way, each module handed the values it needs:

- ``trialspec``: :class:`TrialSpec` and :class:`MeasureSettings`; ``pruning``: the rules a sweep's early stop
  follows (the line, what one-off work may gain, the warm-up's hopeless judge), consulted by the timing loop below
  and by a timed replay.
- ``job``: the entry (:func:`~autotune.trial.job.run_trial`): the device, what comes before anything compiles (the
  study's caches, ``compilecache``; shipped artifacts, ``artifacts_io``; the listed kernels pinned), then ``build``,
  then what comes after (the machine's fingerprint, ``fingerprint``; what it compiled saved); failures classified
  (``failures``).
- ``build``: the spec's params split into knobs and workload params, the workload built; a kernel workload times
  itself, a training one goes to ``training``.
- ``training``: a training trial prepared (``batches``, the reference pass of ``numerics``, the model FLOPs of
  ``flops``, counted once per study and shape by ``flopcache``, the knobs applied, the step of ``trainstep``), then
  its stages in order: the eager probe (``eagerprobe``), the first step, the warm-up (``warmup``), the timed window
  (``measure``: timers, statistics, telemetry), the result (``outcome``), the profile
  (:mod:`autotune.profiling.capture`).
- ``compilephases``: where a compiled trial's compile went, by the compiler's own clocks.
- ``ahead``: a trial's graph compiled ahead, on the CPU, in a process of its own; ``preload``: what the trial server
  imports once.
- ``firststeps``: not a trial but a production start in its own process (a tuned config applied, its first steps
  timed, what it compiled saved): the sweep's rehearsal of the winner's start, and the start benchmark.

A new stage of a training trial is a module of its own, called in order from ``training``; a new metric a trial
reports is added where its figure is measured and put in the result by ``outcome``.
"""
