"""The Inductor options a tuned configuration may carry: which ones, their values, their text form.

Inductor's most expensive options (minutes of compile a trial) are not searched: a space's
``finalists:`` stage re-tries the search's best configurations with them (README: "Finalists"),
and the ``inductor`` knob carries them from that trial to ``autotune export`` and ``cfg.apply()``.
Only the options of :data:`ALLOWED` that the installed torch has are accepted, with the type its
``torch._inductor.config`` gives them (bool, or text for the GEMM backends).

In a trial's params the options are one text, ``name=value`` pairs joined by ``;`` in name order
(``coordinate_descent_tuning=true;max_autotune=true``): params must be plain values (they are
compared and hashed to find repeats), and ``;`` leaves the backends' commas alone. A mapping
(the YAML form) and that text are both accepted wherever the knob is read.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from autotune.errors import AutotuneError

__all__ = ["ALLOWED", "GEMM_BACKENDS", "available", "cache_workarounds", "from_text", "parse", "problems", "to_text"]

# What a space may set (README "Finalists"): the options torchtitan and Inductor's own max-autotune modes turn.
ALLOWED = (
    "coordinate_descent_tuning",
    "max_autotune",
    "max_autotune_gemm_backends",
    "epilogue_fusion",
    "shape_padding",
    "triton.cudagraphs",
)
# The backends max_autotune_gemm_backends may name (torch 2.13's torch/_inductor/config.py). Inductor
# ignores any other name without a word, so a typo would re-measure nothing new: it is refused here.
GEMM_BACKENDS = ("ATEN", "TRITON", "CPP", "CUTLASS", "CUTEDSL", "NVGEMM", "CK", "CKTILE")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}

OptionValue = bool | str


def available() -> dict[str, type]:
    """The allowed options this torch's Inductor has, with their type (``bool`` or ``str``)."""
    # deferred: Inductor's config adds ~1.2 s to torch's import, and only a knob or space that names Inductor
    # options asks for it (importing it starts no thread)
    from torch._inductor import config

    current = config.get_config_copy()
    return {name: type(current[name]) for name in ALLOWED if name in current}


def cache_workarounds(options: Mapping[str, Any], torch_version: str | None = None) -> dict[str, Any]:
    """Options to add to ``options`` so that a process that loads their compile from Inductor's caches (a
    re-measurement, production with the shipped artifacts) gets all of it; empty where nothing is needed.

    Both concern ``coordinate_descent_tuning``, whose tuned block sizes a start must find in the autotune cache
    marked as found by it, else it tunes the kernel again (seconds each, at every start):

    - torch before 2.12 loses that mark for a kernel the FX graph cache hands over with its static launcher (the
      default on CUDA): 2.11's ``recheck_autotune_cache`` ignores a cached result for a kernel of one config, and
      drops ``found_by_coordesc`` for the others (on an H100 ResNet-50's winner, a finalist with this option, spent
      182 s in its first production steps with its artifacts loaded; pytorch/pytorch#173391, in 2.12, fixed it).
      Triton's own launcher alone did not help (197 s): a kernel built by one of Inductor's compile
      workers reaches the process as a pickled autotuner, and Triton's ``Config`` pickles without the mark
      (pytorch/pytorch#181292), so the cached result is read, then tuned again. So there the static launcher is off
      and the kernels are built in the process itself (``compile_threads: 1``; the FX graph cache's key leaves that
      setting out, and from the shipped artifacts there is little to build). The price is paid where the graph is
      compiled for the first time (the finalist's own trial builds its kernels one after another: the finalist of
      the H100 run above waited 10 s for kernel builds with 16 workers), and repaid by each re-measurement and
      production start that then skips the tuning (about 190 s each there): with both, production with the
      artifacts compiled its first steps in 43.7 s instead of 197.2 s (BENCHMARKS.md).
    - torch before 2.13 (2.11 seen; 2.12 not checked) halves a reduction kernel's RBLOCK after it compiled it from
      a cached result (``_dynamic_scale_rblock``, for occupancy) and benchmarks both; that benchmark saves its
      winner without the mark, so the next start tunes the kernel again, and saves it with the mark, and the one
      after benchmarks again (pytorch/pytorch#181789, #181292; 2.13 skips the halving on a cache hit). ResNet-50's
      production starts on an H100 spent 8.8 and 14.0 s tuning so (BENCHMARKS.md). Coordinate descent tunes
      RBLOCK itself, so the halving is off where it runs: ``dynamic_scale_rblock: False``.

    The trial compiles with the same options as production (:func:`autotune.knobs.compile.compile_arguments`), so
    what it measured is what ships. An option the space sets itself is left as it is.
    """
    import torch  # the version, and below Inductor's config: only knobs with Inductor options ask
    from torch.torch_version import TorchVersion

    if not options.get("coordinate_descent_tuning"):
        return {}
    version = TorchVersion(torch_version or torch.__version__)
    if version >= "2.13":
        return {}
    from torch._inductor import config

    known = config.get_config_copy()
    found: dict[str, Any] = {}
    if version < "2.12" and "use_static_cuda_launcher" not in options and "use_static_cuda_launcher" in known:
        found = {"use_static_cuda_launcher": False, **({"compile_threads": 1} if "compile_threads" in known else {})}
    if "dynamic_scale_rblock" not in options and "dynamic_scale_rblock" in known:
        found["dynamic_scale_rblock"] = False
    return found


def problems(options: Mapping[Any, Any]) -> list[tuple[str, str]]:
    """``(option, problem)`` for every option that cannot be set as given; empty when all can."""
    types = available()
    found: list[tuple[str, str]] = []
    for name, value in options.items():
        problem = _name_problem(str(name), types) or _value_problem(str(name), value, types[str(name)])
        if problem:
            found.append((str(name), problem))
    return found


def _name_problem(name: str, types: Mapping[str, type]) -> str | None:
    if name in types:
        return None
    if name in ALLOWED:
        import torch  # here, as torch._inductor below: validating a space that names no option imports neither

        return f"not an option of this torch's Inductor (torch {torch.__version__})"
    from torch._inductor import config  # importing Inductor costs seconds: only a bad option name pays for it

    allowed = ", ".join(types)
    if name in config.get_config_copy():
        return f"an Inductor option autotune does not set (it sets: {allowed})"
    close = difflib.get_close_matches(name, list(types), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown Inductor option ({hint}autotune sets: {allowed})"


def _value_problem(name: str, value: Any, kind: type) -> str | None:
    try:
        _typed(name, value, kind)
    except ValueError as exc:
        return str(exc)
    return None


def _typed(name: str, value: Any, kind: type) -> OptionValue:
    """``value`` as the option's type; ValueError says what is wrong with it."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if isinstance(value, str) and text in _TRUE | _FALSE:
            return text in _TRUE
        raise ValueError(f"{value!r} is not true or false")
    if name == "max_autotune_gemm_backends":
        return _gemm_backends(value)
    if not isinstance(value, str) or not value or any(c in value for c in ";= \t"):
        raise ValueError(f"{value!r} is not a single word of text")
    return value


def _gemm_backends(value: Any) -> str:
    names = [part.strip().upper() for part in str(value).split(",")] if isinstance(value, str) else []
    unknown = [n for n in names if n not in GEMM_BACKENDS]
    if not names or unknown:
        raise ValueError(f"{value!r} is not a comma-separated list of {', '.join(GEMM_BACKENDS)}")
    return ",".join(names)


def parse(value: Any) -> dict[str, OptionValue]:
    """Options from a mapping or their text form, typed; AutotuneError names every problem."""
    options = value if isinstance(value, Mapping) else from_text(str(value))
    found = problems(options)
    if found:
        raise AutotuneError("; ".join(f"inductor option {name}: {problem}" for name, problem in found))
    types = available()
    return {str(name): _typed(str(name), v, types[str(name)]) for name, v in options.items()}


def to_text(options: Mapping[str, OptionValue]) -> str | None:
    """The params form: ``name=value`` pairs in name order joined by ``;``; None for no options."""
    if not options:
        return None
    shown = {name: (str(v).lower() if isinstance(v, bool) else str(v)) for name, v in options.items()}
    return ";".join(f"{name}={shown[name]}" for name in sorted(shown))


def from_text(text: str) -> dict[str, str]:
    """The pairs of a text form, untyped (:func:`parse` types and checks them)."""
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        name, equals, value = item.partition("=")
        if not equals or not name.strip():
            raise AutotuneError(f"inductor option {item!r} is not name=value (e.g. coordinate_descent_tuning=true)")
        pairs[name.strip()] = value.strip()
    return pairs
