"""Library warnings that tell an autotune user nothing, silenced in one place.

- Inductor advises turning TF32 on at every graph it compiles on an Ampere-or-newer GPU while matmuls run in full
  fp32. In a trial, a compile ahead or a rehearsed start, the precision knob decides TF32 on purpose and the search
  measures both, so the advice only repeats itself (an H200 sweep printed it once per graph compiled ahead).
- Python's multiprocessing resource tracker warns at exit of "leaked semaphore objects" that trial processes ended
  by their hard stop left registered. The tracker unlinks them as it warns: nothing is lost, and the line closed
  every GPU sweep.
"""

from __future__ import annotations

import sys
import warnings

__all__ = ["quiet_resource_tracker", "quiet_tf32_hint"]

# Inductor's advice (torch/_inductor/compile_fx.py), printed once per process that compiles without TF32.
_TF32_HINT = "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled"
# A -W option (a literal prefix of the message): the tracker is its own interpreter, started with this process's
# warning options (multiprocessing.util._args_from_interpreter_flags), so a filter set here reaches it.
_TRACKER_FILTER = "ignore:resource_tracker:UserWarning"


def quiet_tf32_hint() -> None:
    """Silence Inductor's TF32 advice in this process (one that compiles a configuration the search chose)."""
    warnings.filterwarnings("ignore", message=_TF32_HINT)


def quiet_resource_tracker() -> None:
    """Silence the resource tracker's leaked-semaphore warning at exit: call before the first process is started
    (the tracker takes this process's warning options when it starts)."""
    if _TRACKER_FILTER not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_FILTER)
