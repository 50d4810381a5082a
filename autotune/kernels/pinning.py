"""Pinning a ``triton.autotune`` kernel to one config, and recording what it launched.

A pinned kernel's ``configs`` list is cut to the chosen config: Triton then launches that config
for every shape key without benchmarking anything, in eager mode and inside ``torch.compile``
(which reads ``configs`` when it traces the kernel). Each eager launch goes through a thin wrapper
of the kernel's ``run`` that notes the shape key as Triton's autotuner forms it (the values of the
``key`` arguments, then the dtypes of the tensor arguments), so a trial can say which listed
kernels ran, on which shapes; a compiled graph launches the kernel without Python, so under
``torch.compile`` the keys come from the eager passes (the trial's fp32 reference pass is one).

In production (:func:`pin_measured`) a launch with a shape key that was never measured warns once
and falls back to the kernel's own configs: the tuned config is only known to be best where it
was measured.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KernelWarning", "Launches", "pin", "pin_measured", "shape_key"]


class KernelWarning(UserWarning):
    """A tuned kernel that production cannot pin as measured (missing, or launched on a new shape)."""


@dataclass
class Launches:
    """The launches of one pinned kernel: how many, and the distinct shape keys."""

    count: int = 0
    keys: list[tuple[Any, ...]] = field(default_factory=list)

    def note(self, key: tuple[Any, ...]) -> None:
        self.count += 1
        if key not in self.keys:
            self.keys.append(key)


def shape_key(autotuner: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """The key Triton's autotuner caches a choice under: ``key`` argument values, then tensor dtypes."""
    named = {**dict(zip(autotuner.arg_names, args, strict=False)), **kwargs}
    named = {name: value for name, value in named.items() if name in autotuner.arg_names}
    key: list[Any] = [named[name] for name in autotuner.keys if name in named]
    key += [str(value.dtype) for value in named.values() if hasattr(value, "dtype")]
    return tuple(key)


def _wrap_run(autotuner: Any, before: Callable[[tuple[Any, ...]], None]) -> None:
    """Call ``before(shape key)`` ahead of every launch of ``autotuner`` (once wrapped, re-wrapping replaces)."""
    run = type(autotuner).run  # the class's method: a second pin must not wrap the first wrapper

    def pinned_run(*args: Any, **kwargs: Any) -> Any:
        before(shape_key(autotuner, args, kwargs))
        return run(autotuner, *args, **kwargs)

    autotuner.run = pinned_run


def pin(autotuner: Any, config: Any, launches: Launches | None = None) -> Launches:
    """Launch only ``config`` from now on, and count launches in ``launches`` (a new one by default)."""
    launches = launches if launches is not None else Launches()
    autotuner.configs = [config]
    autotuner.cache.clear()
    _wrap_run(autotuner, launches.note)
    return launches


def pin_measured(autotuner: Any, config: Any, measured: Collection[tuple[Any, ...]], name: str) -> None:
    """Pin ``config`` for the shape keys in ``measured``; any other key warns once and autotunes as before."""
    original = list(autotuner.configs)
    autotuner.configs = [config]
    autotuner.cache.clear()
    known = {tuple(key) for key in measured}
    warned: set[tuple[Any, ...]] = set()
    lock = threading.Lock()
    run = type(autotuner).run

    def measured_run(*args: Any, **kwargs: Any) -> Any:
        key = shape_key(autotuner, args, kwargs)
        if not known or key in known:
            return run(autotuner, *args, **kwargs)
        with lock:
            if key not in warned:
                warned.add(key)
                warnings.warn(
                    f"kernel {name}: shape key {key} was not measured when it was tuned; "
                    "using the kernel's own configs for it",
                    KernelWarning,
                    stacklevel=2,
                )
            autotuner.configs = original  # Triton caches its choice for this key
            try:
                return run(autotuner, *args, **kwargs)
            finally:
                autotuner.configs = [config]

    autotuner.run = measured_run
