"""The one error root of autotune.

Exceptions are for bad user input and for bugs; a trial that fails on the GPU is a value
(:class:`autotune.measurement.TrialResult` with a non-ok status), never an exception.
"""

from __future__ import annotations

__all__ = ["AutotuneError", "InvalidCombination", "NumericsError", "first_line"]


class AutotuneError(Exception):
    """Bad user input: the CLI prints the message on one line and exits with code 2."""


class InvalidCombination(AutotuneError):
    """Every knob value is legal on its own, but together they cannot run (trial status ``invalid``)."""


class NumericsError(Exception):
    """Raised inside a trial job: it ran, but its results are not trustworthy (non-finite loss, a
    loss or kernel output too far from the fp32 reference). The job reports status ``numerics``."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message: drivers and compilers append pages of background."""
    return (str(error).strip().splitlines() or [""])[0]
