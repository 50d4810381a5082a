"""The finishing stages: what runs once the search has ended, once per study however many processes share it.

- ``once_per_study.py``: :class:`Finishing`: the search leases, and the finishing lease that lets one process run
  the stages, in order.
- ``remeasure.py``: the top configurations measured again in fresh processes; views rank them by their medians.
- ``finalists.py``: the best configurations re-tried with Inductor's expensive options (the space's ``finalists``).
- ``rehearsal.py``: the winner's production start rehearsed, so that what ships is what production looks up.
- ``profile.py``: ``--profile``: torch.profiler over the default and the winner, side by side.
- ``report.py``: the study's report page, written beside its storage and logged to MLflow.
- ``summary.py``: the sweep's summary, the study's winner attribute, the MLflow parent run completed.
- ``time_limit.py``: a time limit that counts the stages: what the search leaves them, what a finalist needs.
- ``lineup.py``: which stages run, in which order (``finishing_stages``), and whether any runs a trial.

A new stage is a class with ``name`` and ``run(ctx)`` (the :class:`~autotune.sweep.context.Stage` protocol) in a
module of its own here, listed in ``finishing_stages`` (``lineup.py``), and in ``finishing_runs_trials`` beside it
if it runs trials; ``remeasure.py`` is one to copy.
"""
