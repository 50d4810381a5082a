"""How autotune writes a number for people: one formatter for every line it prints, table it draws and page it writes.

A figure reads the same in the progress line, the summary, ``status``, the leaderboard, ``verify``, the report and
MLflow's description: ``365,515 tokens/s`` everywhere, never ``3.655e+05`` in one place and ``365,515`` in another.
Machine-readable outputs (``--json``, ``--format csv``, MLflow's metrics) keep the full values.
"""

from __future__ import annotations

import math

__all__ = ["duration", "flops_text", "minutes", "number", "quantity", "ratio", "share"]

_SIGNIFICANT = 4  # below 1,000: 8.884 ms, 59.77 GiB, 0.06123 J/sample


def number(value: float) -> str:
    """``365,515`` from 1,000 up (whole, with thousands separators), four significant digits below (``8.884``,
    ``0.0612``), never e-notation; ``nan`` and ``inf`` as Python writes them."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 999.5:  # rounds to 1,000 or more: whole units
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    decimals = max(0, _SIGNIFICANT - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def quantity(value: float, unit: str = "") -> str:
    """A figure and its unit: ``365,515 tokens/s``, ``8.884 ms``; the number alone without a unit."""
    return f"{number(value)} {unit}".rstrip()


def ratio(value: float) -> str:
    """A speedup or another ratio of two figures: ``6.93x``."""
    return f"{value:.2f}x"


def share(value: float) -> str:
    """A fraction as a percentage: ``33%``."""
    return f"{value:.0%}"


def duration(seconds: float) -> str:
    """An elapsed or remaining time: ``42s``, ``7m05s``, ``3h12m``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def minutes(seconds: float) -> str:
    """A sum of trial time, as the summary's time shares give it: ``12.4 min``."""
    return f"{seconds / 60:.1f} min"


def flops_text(tflops: float | None, mfu: float | None) -> str:
    """``632.8 TFLOP/s, 64% MFU``, ``0.0318 TFLOP/s`` where there is no MFU (a CPU, a GPU of unknown peak), or
    nothing where the model FLOPs were not counted."""
    if tflops is None:
        return ""
    return quantity(tflops, "TFLOP/s") + (f", {share(mfu)} MFU" if mfu is not None else "")
