"""Views of a study for people and tools, each rendering the record model (:mod:`autotune.records`), computing
nothing of its own: which trial wins, by which figure and how much faster are the records' answers.

- ``leaderboard``: the ranked table (table, JSON, CSV).
- ``status``: a running sweep from another terminal.
- ``verify``: re-measuring an exported config on this machine.
- ``progress``: the sweep's progress lines and status line.
- ``text``: a trial's params and ``autotune trial``'s summary.

The report page (:mod:`autotune.reporting`), MLflow's runs (:mod:`autotune.tracking`) and the exported file
(:mod:`autotune.views.export`) render the same records. A view may import the records, the storage and the trial's
result types; never the sweep.
"""
