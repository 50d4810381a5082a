"""Problems found while validating a space: :class:`SpaceError`, how they are collected and worded.

Every validator reports into one :class:`_Report` instead of raising, so one pass reports every
problem in the file; the small checks shared by all sections (unknown keys, a mapping section, a
value from a fixed list) live here too.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autotune.errors import AutotuneError
from autotune.space.params import _show

__all__ = ["SpaceError"]

_INVALID = object()  # a value that failed validation (its problem is already reported)


class SpaceError(AutotuneError):
    """A search space with problems; ``problems`` lists them, one ``FILE: key.path: problem`` each."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


class _Report:
    """Collects problems as ``FILE: key.path: problem`` lines."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.problems.append(f"{self.file}: {where}: {problem}" if where else f"{self.file}: {problem}")


def _quote(value: Any) -> str:
    """A value in a message: text quoted ('bf17'), anything else as YAML writes it (0, true)."""
    return repr(value) if isinstance(value, str) else _show(value)


def _did_you_mean(name: Any, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(name), list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _show_type(value: Any) -> str:
    names: dict[type, str] = {list: "a list", dict: "a mapping", str: f"the text {value!r}"}
    return names.get(type(value), repr(value))


def _check_keys(section: Mapping[Any, Any], allowed: Sequence[str], where: str, report: _Report) -> None:
    for key in section:
        if key not in allowed:
            hint = _did_you_mean(key, allowed) or f" (expected one of {', '.join(allowed)})"
            report.add(f"{where}.{key}" if where else str(key), f"unknown key{hint}")


def _section(data: Mapping[str, Any], key: str, report: _Report) -> dict[Any, Any] | None:
    """A mapping under ``key``: empty when absent or blank, None (reported) when not a mapping."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        report.add(key, f"expected a mapping of settings, got {_show_type(value)}")
        return None
    return value


def _one_of(value: Any, options: Sequence[str], where: str, report: _Report) -> Any:
    if value not in options:
        report.add(where, f"{_quote(value)} is not one of {', '.join(options)}{_did_you_mean(value, options)}")
        return _INVALID
    return value
