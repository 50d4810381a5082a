"""What proposes the next configuration: the samplers, the view of the study they read, warm-start evidence,
and recorded measurements that answer trials in place of a GPU (replay).

- ``samplers``: Optuna samplers by the names a space uses (``auto`` chosen by measurement).
- ``samplerview``: :class:`~autotune.search.samplerview.OrdinalView`, what a sampler sees of the study.
- ``evidence``: another study's measured trials as this study's sampler reads them (``--warm-start``).
- ``replay``: answers from recorded measurements (``--replay``), to compare strategies on a CPU;
  ``replaytimes``: the same with each trial's recorded seconds, compile cache and pruning included.
- ``costaware``: proposes by expected improvement per predicted second of trial (TPE's default); its models:
  ``surrogate`` (the gain, a Bayesian linear model) and ``costmodel`` (a trial's seconds, compile included).

It may import optuna, the space and the record model; never the sweep or the views.
"""
