"""What the `triton.autotune` kernels a trial did not pin chose for themselves: production pins the same.

A kernel decorated with ``triton.autotune`` and not listed in the space (GPT-2's fused LM head in
``gpt2.yaml``; a user's own kernel) benchmarks all of its configs the first time it launches on each shape
key, in every process, compiling each: the fused head has 34. The shipped compile artifacts do not hold those
choices (they are the kernel's own, in Python): on an H100 the exported GPT-2 winner (fused head) took 23.2 s to
compile its first steps with its artifacts, and 7.3 to 10.1 s with its head's choice pinned (BENCHMARKS.md).

The walk over the loaded modules takes about 50 ms with torch, Triton, transformers and lightning loaded
(75 ms on the 2-core development machine with torch and Triton), twice per trial: here, and before the
trial's reference pass (:mod:`autotune.kernels.untuned`).

So a trial records, after it measured, each such autotuner's choices (:func:`autotuned_choices`): found among
the loaded modules' globals, any ``Autotuner`` whose cache holds a choice, keyed by its import path
(``module:name``); the export writes them under ``kernels:`` with ``chosen_by: autotune``, and production's
:func:`autotune.kernels.pinning.pin_tuned` pins them as the trial ran them. A kernel that is not a module
global (made inside a function) cannot be found by path and is left to choose again.
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Collection
from typing import Any

from autotune.kernels.listing import config_label

__all__ = ["CHOSEN_BY_AUTOTUNE", "autotuned_choices", "loaded_autotuners"]

CHOSEN_BY_AUTOTUNE = "autotune"  # the `chosen_by` of a kernels: entry its own autotuner chose (not searched)
_SCALARS = (bool, int, float, str)


def autotuned_choices(skip: Collection[str] = ()) -> dict[str, dict[str, Any]]:
    """Import path -> ``{"chosen_by": "autotune", "by_shape": [{shape_key, config, kwargs, num_warps,
    num_stages}, ...]}`` for every loaded module-level ``Autotuner`` that chose a config in this process (paths in
    ``skip``, the trial's pinned kernels, left out). Nothing when Triton was never imported."""
    choices: dict[str, dict[str, Any]] = {}
    for path, autotuner in loaded_autotuners():
        by_shape = _by_shape(autotuner)
        if path not in skip and by_shape:
            choices[path] = {"chosen_by": CHOSEN_BY_AUTOTUNE, "by_shape": by_shape}
    return choices


def loaded_autotuners() -> list[tuple[str, Any]]:
    """Every ``triton.autotune`` kernel that is a global of a loaded module, by import path (``module:name``; its
    home module's name where it has several), sorted by path; none when Triton was never imported."""
    autotuner_module = sys.modules.get("triton.runtime.autotuner")
    if autotuner_module is None:
        return []
    autotuner_type = autotuner_module.Autotuner
    found: dict[int, tuple[str, Any]] = {}  # one path per autotuner: its home module's, else the first seen
    with warnings.catch_warnings():  # some globals warn when their class is asked (torch.distributed.reduce_op)
        warnings.simplefilter("ignore")
        for module_name, module in list(sys.modules.items()):  # a copy: an import elsewhere must not break the walk
            for name, value in _globals(module):
                if not issubclass(type(value), autotuner_type):  # type(): a proxy may raise on __class__
                    continue
                home = _home_module(value) == module_name
                if id(value) not in found or home:
                    found[id(value)] = (f"{module_name}:{name}", value)
    return sorted(found.values(), key=lambda item: item[0])


def _home_module(autotuner: Any) -> str | None:
    """The module that defines the kernel's function: under Triton's wrappers (``triton.heuristics``, the CPU
    interpreter's function), whose own ``__module__`` is Triton's."""
    wrapped = getattr(autotuner, "fn", None)
    for _ in range(4):
        module = getattr(wrapped, "__module__", None)
        if isinstance(module, str) and module != "triton" and not module.startswith("triton."):
            return module
        wrapped = getattr(wrapped, "fn", None)
    return None


def _globals(module: object) -> list[tuple[str, Any]]:
    """A loaded module's globals; none for what is not a module or keeps no ``__dict__`` (cffi's ``Lib`` objects
    sit in sys.modules as modules with no ``__dict__``)."""
    if not isinstance(module, types.ModuleType):
        return []
    try:
        # Past a class's own __getattribute__: importlib's lazy modules would import themselves on any attribute.
        namespace = object.__getattribute__(module, "__dict__")
    except AttributeError:
        return []
    return list(namespace.items())


def _by_shape(autotuner: Any) -> list[dict[str, Any]]:
    """The autotuner's choice per shape key, in the form a tuned file keeps (keys of plain values only: a key
    that YAML could not write back is left out, and its shape chooses again in production)."""
    out = []
    for key, config in list(autotuner.cache.items()):
        if not all(isinstance(part, _SCALARS) for part in key):
            continue
        out.append(
            {
                "shape_key": list(key),
                "config": config_label(config),
                "kwargs": dict(config.kwargs),
                "num_warps": config.num_warps,
                "num_stages": config.num_stages,
            }
        )
    return out
