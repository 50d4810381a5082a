"""Profiling with torch.profiler: the steps of a trial captured, their events broken down by kernel category, two
profiles side by side.

Modules, lowest first:

- ``kernel_categories``: which category (matmul, attention, convolution, elementwise, ...) a kernel or op is in.
- ``breakdown``: a profile's events -> ms per step by category, the busiest kernels, the GPU's idle time.
- ``capture``: a few steps under torch.profiler inside the trial process, after its timed window (the trial job calls
  it when its spec asks for ``profile_steps``), and the Chrome trace.
- ``table``: two summaries side by side, as text for a terminal (100 columns) and for MLflow.

It imports neither the trial job nor the sweep: the trial imports it. ``autotune profile`` (the default and the winner
of a study, each run again in an isolated process, side by side) is :mod:`autotune.views.profile_study`, and the
sweep's profile stage :mod:`autotune.sweep.stages.profile`.
"""
