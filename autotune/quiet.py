"""Library warnings that tell an autotune user nothing, silenced in one place.

- Inductor advises turning TF32 on at every graph it compiles on an Ampere-or-newer GPU while matmuls run in full
  fp32. In a trial, a compile ahead or a rehearsed start, the precision knob decides TF32 on purpose and the search
  measures both, so the advice only repeats itself (an H200 sweep printed it once per graph compiled ahead).
- torchao's import logs a warning per C++ extension its wheel carries that this machine cannot load (its CUDA-only
  kernels, on a CPU), and torch warns of the enums torchao registers with its pytree: float8 trials run the same
  either way, and a CPU trial printed five such lines. Python 3.12 compiling one of torchao's docstrings (on an
  image that keeps no bytecode) warns of an escape sequence, in every trial process that imports it, also through
  transformers, which imports torchao where it is installed: an H200 llama sweep printed it five times a trial.
- Python's multiprocessing resource tracker warns at exit of "leaked semaphore objects" that trial processes ended
  by their hard stop left registered. The tracker unlinks them as it warns: nothing is lost, and the line closed
  every GPU sweep.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator

__all__ = ["quiet_resource_tracker", "quiet_tf32_hint", "quiet_torchao_import", "quiet_torchao_syntax"]

# Inductor's advice (torch/_inductor/compile_fx.py), printed once per process that compiles without TF32.
_TF32_HINT = "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled"
# A -W option (a literal prefix of the message): the tracker is its own interpreter, started with this process's
# warning options (multiprocessing.util._args_from_interpreter_flags), so a filter set here reaches it.
_TRACKER_FILTER = "ignore:resource_tracker:UserWarning"


def quiet_tf32_hint() -> None:
    """Silence Inductor's TF32 advice in this process (one that compiles a configuration the search chose)."""
    warnings.filterwarnings("ignore", message=_TF32_HINT)


def quiet_torchao_syntax() -> None:
    """Silence, in this process, the warning Python raises compiling torchao's sources (whoever imports them): a
    SyntaxWarning from Python 3.12, a DeprecationWarning before. A compile-time warning's module is its file's path
    less ``.py``, hence the pattern."""
    for category in (SyntaxWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=r".*[/\\]torchao[/\\]")


def quiet_resource_tracker() -> None:
    """Silence the resource tracker's leaked-semaphore warning at exit: call before the first process is started
    (the tracker takes this process's warning options when it starts)."""
    if _TRACKER_FILTER not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_FILTER)


@contextlib.contextmanager
def quiet_torchao_import() -> Iterator[None]:
    """Around the first import of torchao: its loggers, and torch's pytree's, say only errors, and the SyntaxWarning
    Python 3.12 raises compiling one of torchao's docstrings (an image without its bytecode) is not shown."""
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
