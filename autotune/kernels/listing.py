"""Triton kernels a space lists (``kernels: [package.module:kernel]``), as search params.

A kernel decorated with ``@triton.autotune(configs=[...], key=[...])`` is listed by its import
path. Its ``configs`` are the choices: one categorical param per kernel, named after the kernel
and valued by a readable label of the config (``BLOCK_SIZE=1024 num_warps=4 num_stages=2``), so
the leaderboard, MLflow and the export show what was chosen. A kernel declared with
:func:`autotune.kernels.declare.tunable` gets one ordered param per constexpr instead
(``fused_add.BLOCK_SIZE``, ``fused_add.num_warps`` ...), so a sampler can exploit their order.

This module imports Triton lazily: listing a space's kernels imports them, nothing else here does.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.errors import AutotuneError
from autotune.usermodules import import_user_module

__all__ = ["KernelParam", "ListedKernel", "config_label", "load_kernel", "wrapped"]

_LAUNCH_SETTINGS = ("num_warps", "num_stages")


def config_label(config: Any) -> str:
    """A Triton ``Config`` as people read it: ``BLOCK_SIZE=1024 num_warps=4 num_stages=2``."""
    parts = [f"{name}={value}" for name, value in config.kwargs.items()]
    parts += [f"{name}={getattr(config, name)}" for name in _LAUNCH_SETTINGS]
    return " ".join(parts)


@dataclass(frozen=True)
class KernelParam:
    """One search param a listed kernel contributes: its name, its values, whether they are ordered."""

    name: str
    values: tuple[Any, ...]
    ordinal: bool


@dataclass(frozen=True)
class ListedKernel:
    """A kernel named in a space: its import path, the short name its params carry, and its autotuner."""

    path: str
    alias: str
    autotuner: Any  # triton.runtime.autotuner.Autotuner

    @property
    def declared(self) -> Mapping[str, tuple[Any, ...]] | None:
        """The ordered values per constexpr (and launch setting) of a kernel declared with ``tunable``."""
        return getattr(self.autotuner, "autotune_values", None)

    @property
    def feasibility(self) -> str | None:
        """A declared kernel's rule over its own names (e.g. ``BLOCK_SIZE * num_warps <= 65536``)."""
        return getattr(self.autotuner, "autotune_feasibility", None)

    def params(self) -> list[KernelParam]:
        """The search params this kernel contributes to a space."""
        if self.declared is None:
            labels = tuple(config_label(c) for c in self.autotuner.configs)
            return [KernelParam(self.alias, labels, ordinal=False)]
        return [
            KernelParam(f"{self.alias}.{name}", tuple(values), ordinal=True)
            for name, values in self.declared.items()
            if len(values) > 1
        ]

    def fixed(self) -> dict[str, Any]:
        """A declared kernel's settings that have one value (not searched)."""
        declared = self.declared or {}
        return {name: values[0] for name, values in declared.items() if len(values) == 1}

    def config_for(self, params: Mapping[str, Any]) -> Any:
        """The ``triton.Config`` that a trial's params choose for this kernel."""
        if self.declared is None:
            label = params.get(self.alias)
            for config in self.autotuner.configs:
                if config_label(config) == label:
                    return config
            known = "; ".join(config_label(c) for c in self.autotuner.configs)
            raise AutotuneError(f"kernel {self.path}: no config {label!r} (its configs: {known})")
        return self.make_config(self.chosen(params))

    def chosen(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A declared kernel's values in ``params`` (``alias.NAME`` keys), fixed ones filled in, by plain name."""
        prefix = f"{self.alias}."
        values = {key.removeprefix(prefix): value for key, value in params.items() if key.startswith(prefix)}
        return {**self.fixed(), **values}

    @staticmethod
    def make_config(values: Mapping[str, Any]) -> Any:
        import triton  # here: listing a space's kernels by name needs no Triton until a config is made

        kwargs = {name: value for name, value in values.items() if name not in _LAUNCH_SETTINGS}
        launch = {name: int(values[name]) for name in _LAUNCH_SETTINGS if name in values}
        return triton.Config(kwargs, **launch)


def declared_grid(values: Mapping[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Every combination of a declared kernel's values, in declaration order."""
    names = list(values)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values.values())]


def wrapped(obj: Any, kind: type) -> Any | None:
    """The first ``kind`` among ``obj`` and what it wraps (Triton's wrappers keep the next one in ``fn``:
    ``triton.heuristics`` around ``triton.autotune`` around the JIT function), or None."""
    seen = 0
    while obj is not None and seen < 5:
        if isinstance(obj, kind):
            return obj
        obj, seen = getattr(obj, "fn", None), seen + 1
    return None


def _autotuner_of(obj: Any) -> Any | None:
    """The ``triton.autotune`` object inside ``obj`` (under ``@triton.heuristics`` too), or None."""
    from triton.runtime.autotuner import Autotuner  # here: Triton only once a kernel is looked at

    return wrapped(obj, Autotuner)


def load_kernel(path: str) -> ListedKernel:
    """Import ``package.module:kernel`` and check that it is tunable; bad input raises AutotuneError."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise AutotuneError(f"kernel {path!r}: expected package.module:kernel")
    try:
        module = import_user_module(module_name)
    except Exception as exc:  # a user's module that fails on import is bad input, not our bug
        raise AutotuneError(f"kernel {path!r}: cannot import {module_name!r} ({type(exc).__name__}: {exc})") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise AutotuneError(f"kernel {path!r}: {module_name!r} has no {attr!r}")
    autotuner = _autotuner_of(obj)
    if autotuner is None:
        raise AutotuneError(
            f"kernel {path!r} is not tunable: decorate it with @triton.autotune(configs=[...], key=[...]) "
            "or declare it with autotune.kernels.declare.tunable"
        )
    if getattr(autotuner, "autotune_values", None) is None and len(autotuner.configs) < 2:
        raise AutotuneError(f"kernel {path!r} has {len(autotuner.configs)} config: nothing to choose from")
    return ListedKernel(path, attr, autotuner)
