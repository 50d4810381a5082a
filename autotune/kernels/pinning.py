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
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from autotune.errors import AutotuneError
from autotune.kernels.listing import ListedKernel, config_label, load_kernel

__all__ = ["KernelWarning", "Launches", "TrialPins", "pin", "pin_measured", "pin_tuned", "pinned", "shape_key"]


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


@contextmanager
def pinned(autotuner: Any, config: Any) -> Iterator[Launches]:
    """``autotuner`` pinned to ``config`` inside the block; its own configs and launcher again after it."""
    configs = list(autotuner.configs)
    try:
        yield pin(autotuner, config)
    finally:
        autotuner.configs = configs
        autotuner.cache.clear()
        vars(autotuner).pop("run", None)  # pin() wrapped run on the instance; the class's run returns


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


@dataclass
class TrialPins:
    """The listed kernels of one trial, each pinned to the config the trial's params choose."""

    pinned: list[tuple[Any, Any, Launches]] = field(default_factory=list)  # (ListedKernel, Config, Launches)
    params: dict[str, Any] = field(default_factory=dict)  # the trial's kernel params

    @classmethod
    def pin_all(cls, kernels: Collection[ListedKernel], params: Mapping[str, Any]) -> TrialPins:
        """Pin each listed kernel (:func:`autotune.kernels.listing.load_kernel` imports one); ``params`` holds their
        params among others."""
        pins = cls()
        for kernel in kernels:
            names = [p.name for p in kernel.params()]
            pins.params.update({name: params[name] for name in names if name in params})
            config = kernel.config_for(params)
            pins.pinned.append((kernel, config, pin(kernel.autotuner, config)))
        return pins

    def record(self) -> dict[str, dict[str, Any]]:
        """What the trial result carries: per kernel its config, launches and shape keys.

        A kernel that did not launch is no news in one trial (its params may route around it: the model's own
        LayerNorm instead of the listed one); the sweep's summary warns of one that no trial launched
        (:meth:`autotune.records.StudyRecords.kernels_never_run`).
        """
        kernels: dict[str, dict[str, Any]] = {}
        for kernel, config, launches in self.pinned:
            kernels[kernel.path] = {
                "params": [p.name for p in kernel.params()],
                "config": config_label(config),
                "kwargs": dict(config.kwargs),
                "num_warps": config.num_warps,
                "num_stages": config.num_stages,
                "launches": launches.count,
                "shape_keys": [list(key) for key in launches.keys],
            }
        return kernels


def pin_tuned(kernels: Mapping[str, Mapping[str, Any]]) -> None:
    """Production: pin every kernel of a tuned config (``kernels:`` entries keyed by import path): a listed kernel
    to the config the sweep chose, a kernel that chose for itself in the trial (``chosen_by: autotune``,
    :mod:`autotune.kernels.choices`) to what it chose there.

    A kernel that cannot be imported here warns (:class:`KernelWarning`) and is left as it is.
    """
    for path, tuned in kernels.items():
        if ":" not in path or not ("kwargs" in tuned or "by_shape" in tuned):
            continue  # the built-in matmul workload's block sizes, looked up with kernel_config()
        try:
            kernel = load_kernel(path)
        except AutotuneError as exc:
            warnings.warn(f"tuned kernel not pinned: {exc}", KernelWarning, stacklevel=3)
            continue
        if "by_shape" in tuned:
            _pin_chosen(kernel, tuned["by_shape"])
            continue
        values = {**tuned["kwargs"], "num_warps": tuned["num_warps"], "num_stages": tuned["num_stages"]}
        keys = [tuple(key) for key in tuned.get("shape_keys", [])]
        pin_measured(kernel.autotuner, ListedKernel.make_config(values), keys, path)


def _pin_chosen(kernel: ListedKernel, by_shape: Collection[Mapping[str, Any]]) -> None:
    """What the kernel's autotuner chose in the trial, per shape key: one config for every key is pinned as a
    listed kernel is (also inside ``torch.compile``, which reads ``configs``); where keys chose differently, each
    choice goes into the autotuner's own cache (eager launches skip benchmarking; a compiled graph autotunes)."""
    chosen = {
        tuple(choice["shape_key"]): ListedKernel.make_config(
            {**choice["kwargs"], "num_warps": choice["num_warps"], "num_stages": choice["num_stages"]}
        )
        for choice in by_shape
    }
    if len({config_label(config) for config in chosen.values()}) == 1:
        pin_measured(kernel.autotuner, next(iter(chosen.values())), list(chosen), kernel.path)
    else:
        kernel.autotuner.cache.update(chosen)
