"""``autotune sweep SPACE --gpus 0,1,2,3``: one worker process per GPU, one study, one progress display.

- ``orchestrator.py``: :func:`run_on_gpus` (and ``parse_gpus``): starts the workers, shows their progress, ends them.
- ``worker.py``: the process started for each GPU (``python -m autotune.sweep.gpus.worker FD``): it runs one
  :class:`~autotune.sweep.loop.Sweep`.
- ``messages.py``: what a worker tells the orchestrator over the socket between them, and its life cycle.

A new message between a worker and its orchestrator is a dataclass in ``messages.py``, handled in
``orchestrator.py`` and sent from ``worker.py``. This package stands above the loop (a worker runs one) and below
:mod:`autotune.sweep.launch`; the loop never imports it.
"""
