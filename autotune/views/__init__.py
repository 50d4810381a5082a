"""Views of a study for people and tools, each rendering the record model (:mod:`autotune.records`), computing
nothing of its own: which trial wins, by which figure and how much faster are the records' answers.

- ``leaderboard``: the ranked table (table, JSON, CSV).
- ``status``: a running sweep from another terminal.
- ``verify``: re-measuring an exported config on this machine.
- ``progress``: the sweep's progress lines and status line.
- ``text``: a trial's params and ``autotune trial``'s summary.
- ``export`` and ``shipping``: the exported tuned file and what ships with it.
- ``profile_study``: ``autotune profile``, a study's default and winner profiled side by side (the profiler itself is
  :mod:`autotune.profiling`).
- ``report/``: ``autotune report``, the study as one HTML page of figures and the same figures as PNGs.

Every rendering of the records lives here; MLflow's runs (:mod:`autotune.tracking`) render the same records into the
tracking server. A view may import the records, the storage and the trial's
result types; never the sweep.
"""
