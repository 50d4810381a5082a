"""The proposal side: what a sweep worker asks the sampler, and when what it asks is measured.

- ``proposer.py``: :class:`Proposal` and :class:`Proposer`: ask the sampler, decode params, answer a repeat from its
  earlier measurement, reject a configuration that breaks a feasibility rule.
- ``coverage.py``: what a finite space has left to measure: the budget it caps, the sweep's end when every
  configuration is measured, the untried configuration queued after a repeat.
- ``informed_start.py``: the configuration queued once the PyTorch default is measured; ``expert_choice.py``: what
  it picks (what an expert tries first on the device); ``kernel_start.py``: its configs for the space's Triton kernels;
  ``batch_step.py``: the informed start (or its twin) again at the larger batch its own measured peak says fits.
- ``compile_ahead.py``: while the GPU measures one trial, the CPU compiles the graphs the search will want next;
  ``parked_trials.py``: a trial whose graph is still compiling steps aside while the GPU measures others.
- ``compile_pruning.py``: when a trial is stopped early, before it pays its compile (``pruning_for``).

A new per-proposal decision goes in ``proposer.py``, reading ``ctx.records``; a new way to choose what runs first goes
beside the informed start. What happens to one proposal, from ask to record, is wired in
:mod:`autotune.sweep.trial_turn`, above this package: nothing here imports the faults, the stages or the loop.
"""
