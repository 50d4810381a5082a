"""What a knob is (:class:`KnobSpec`), and how a value given for it is read: a CLI string or a YAML value turned into
the knob's type, or an :class:`AutotuneError` that names the knob and the values it takes.

Each family module describes its knobs with :class:`KnobSpec`; :mod:`autotune.knobs.registry` lists them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.errors import AutotuneError

__all__ = ["KnobSpec", "bounds_text", "check_minimum", "coerce", "parse_bool"]


@dataclass(frozen=True)
class KnobSpec:
    """One knob: its type, the values it takes and what it does (shown by ``--help`` and errors).

    ``minimum`` bounds an int or float knob from below, ``maximum`` a float knob from above; ``nullable`` lets it be
    None (PyTorch's own default).
    ``parse`` reads a value that is more than one word (the ``inductor`` options), raising
    AutotuneError for a bad one.
    """

    name: str
    kind: type
    choices: tuple[Any, ...] | None
    doc: str
    minimum: int | float | None = None
    maximum: float | None = None
    nullable: bool = False
    parse: Callable[[Any], Any] | None = None


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"none", "null", "default"}


def parse_bool(value: Any) -> bool | None:
    """``true/false``, ``1/0``, ``yes/no``, ``on/off`` (any case) as a bool; None for anything else."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return text in _TRUE if text in _TRUE | _FALSE else None


def coerce(spec: KnobSpec, value: Any) -> Any:
    """Turn a CLI string or a YAML value into the knob's type, or say what is wrong with it."""
    if value is None and (spec.kind is bool or spec.nullable):
        return None
    if spec.nullable and str(value).strip().lower() in _NONE:
        return None
    if spec.parse is not None:
        return spec.parse(value)
    if spec.kind is bool:
        if (parsed := parse_bool(value)) is not None:
            return parsed
    elif spec.kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        with contextlib.suppress(ValueError):
            return int(str(value).strip())
    elif spec.kind is float:
        if (number := _finite_float(value)) is not None:
            return number
    elif spec.kind is str and (spec.choices is None or str(value) in spec.choices):
        return str(value)
    raise AutotuneError(f"knob {spec.name}={value!r} is not valid: expected {_allowed(spec)}")


def check_minimum(spec: KnobSpec, value: Any) -> None:
    """Raise AutotuneError for a number below the knob's ``minimum`` or above its ``maximum``."""
    below = spec.minimum is not None and value is not None and value < spec.minimum
    above = spec.maximum is not None and value is not None and value > spec.maximum
    if below or above:
        raise AutotuneError(f"knob {spec.name}={value!r} is not valid: expected {_allowed(spec)}")


def bounds_text(spec: KnobSpec) -> str:
    """A number knob's bounds as messages and the reference say them: ``in [0, 1]``, ``>= 1``, or empty."""
    low, high = spec.minimum, spec.maximum
    if low is not None and high is not None:
        return f"in [{low:g}, {high:g}]"
    if low is not None:
        return f">= {low:g}"
    return f"<= {high:g}" if high is not None else ""


def _finite_float(value: Any) -> float | None:
    """An int, float or numeric text as a finite float; None for anything else (true/false included)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if isinstance(value, int | float) else float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _allowed(spec: KnobSpec) -> str:
    """The values a knob takes, as an error message says them."""
    if spec.choices:
        return ", ".join(str(c).lower() for c in spec.choices)
    word = "a number" if spec.kind is float else f"an {spec.kind.__name__}"
    allowed = f"{word} {bounds_text(spec)}".rstrip()
    return allowed + (" or none" if spec.nullable else "")
