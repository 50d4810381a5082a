"""The knobs autotune turns: one module per family, one registry, the one place each is applied.

- ``spec``: :class:`KnobSpec`, what a knob is, and how a value given for one is read;
- the families, each its knobs' specs and what they do: ``batch``, ``precision``, ``float8`` (FP8 training through
  torchao, an optional extra), ``memory_format``, ``compile``
  (with ``regional``: regional compilation, ``inductor``: the Inductor options, ``assembler``: the ``ptxas`` in
  Triton's keys), ``checkpointing`` (activation checkpointing over the repeated blocks, the compiler's activation
  memory budget), ``attention`` (the SDPA kernel), ``backends`` (cuDNN and matmul flags, TF32), ``optimizer``,
  ``data_path`` (applied by :mod:`autotune.data`);
- ``registry``: :data:`KNOB_SPECS`, every knob's spec in one table, and :class:`Knobs`, a full setting;
- ``applying``: :func:`apply`, which the trial job and production ``cfg.apply()`` both call;
- ``stepcontext``: :class:`StepContext`, what each training step then needs from the knobs (autocast, the attention
  kernel and the memory budget are entered there).

A new knob: its spec and what it does in its family's module (a new family, a new module); its entry in
``KNOB_SPECS`` and its field of ``Knobs`` (``registry``); a clash with another knob in ``Knobs.check_combination``;
its call in :func:`apply`. The space reader, validation, the docs reference and export then know it.
"""

from autotune.knobs.applying import apply, apply_backend_flags, apply_float8
from autotune.knobs.backends import strict_fp32
from autotune.knobs.compile import COMPILE_MODES, compile_arguments
from autotune.knobs.data_path import DATA_KNOBS
from autotune.knobs.precision import AUTOCAST_DTYPES
from autotune.knobs.registry import KNOB_SPECS, Knobs
from autotune.knobs.spec import KnobSpec, parse_bool
from autotune.knobs.stepcontext import StepContext

__all__ = [
    "AUTOCAST_DTYPES",
    "COMPILE_MODES",
    "DATA_KNOBS",
    "KNOB_SPECS",
    "KnobSpec",
    "Knobs",
    "StepContext",
    "apply",
    "apply_backend_flags",
    "apply_float8",
    "compile_arguments",
    "parse_bool",
    "strict_fp32",
]
