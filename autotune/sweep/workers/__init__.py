"""What a sweep worker needs to share its study with other workers, on this host or others.

- ``leases.py``: leases in the study's own database (``autotune_leases``): what runs once per study, and which
  processes still search it.
- ``orphaned_trials.py``: the running trials of a worker that is gone, failed and queued again for the others.
- ``interrupted_trials.py``: a trial stopped by Ctrl-C or SIGTERM, recorded as interrupted and queued to run first.
- ``device_check.py``: is this GPU fit to measure on (no other sweep or process on it, a forked child's small
  kernels right, memory free); ``device_gate.py``: when a ``--gpus`` worker asks, before each trial, and a failed
  device taken out. Every device check lives here.

A new thing every worker of a shared study must agree on (a lease, a claim on a trial) goes here. It stands below
the proposal side and the stages, which use it, and imports neither. The ``--gpus`` launcher that starts worker
processes is :mod:`autotune.sweep.gpus`, above the loop.
"""
