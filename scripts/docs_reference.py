"""The generated parts of docs/reference/: the tables of space.md, and cli.md whole, from the code's own tables.

    python scripts/docs_reference.py           # rewrite them
    python scripts/docs_reference.py --check   # exit 1, naming the file, where one is out of date

``tests/test_docs.py`` fails while either file is out of date, so the reference cannot drift from the code.

space.md is written by hand around marked regions, each of which this script rewrites::

    <!-- BEGIN GENERATED knobs (scripts/docs_reference.py) -->
    ...
    <!-- END GENERATED knobs -->

A region's rows come from the code: the knob registry (:data:`autotune.knobs.KNOB_SPECS`), the keys and
vocabularies the space reader accepts (:mod:`autotune.space`), the defaults it fills in (read back from a minimal
space it validates), the built-in workloads' build functions, the Triton kernels the package ships, the Inductor
options a finalist may set, the CLI's commands and options (click). What the code does not say in words (what a
space key is for, what a workload parameter does) is written here, in the ``*_DOCS`` tables; a name the code accepts
without an entry there stops the generation with a message naming it, so a new key or knob cannot ship undocumented.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

REPO = Path(__file__).resolve().parents[1]
SPACE_MD = REPO / "docs" / "reference" / "space.md"
CLI_MD = REPO / "docs" / "reference" / "cli.md"

_BEGIN = re.compile(r"<!-- BEGIN GENERATED (?P<name>[a-z0-9-]+) \(scripts/docs_reference\.py\) -->\n")
_END = "<!-- END GENERATED {name} -->"

# The base space whose validated form tells the defaults the reader fills in.
_MINIMAL_SPACE = "workload: {name: resnet50}\nparams: {precision: [default, bf16]}\n"


class MissingDocs(Exception):
    """The code accepts a name that the ``*_DOCS`` tables here do not describe."""


@dataclass(frozen=True)
class Doc:
    """A hand-written entry: the values in words (``{NAME}`` fields filled from the code's vocabularies), what the
    thing does, and the default in words where the code has none to read (``required``, say)."""

    values: str
    doc: str
    default: str | None = None


# --- What the code does not say in words --------------------------------------------------------------------

TOP_DOCS: dict[str, Doc] = {
    "workload": Doc(
        "mapping: `name`, `preset`, `args`",
        "What a trial trains: a built-in workload or your `package.module:function` ([workload](#workload)).",
        "required",
    ),
    "device": Doc(
        "{DEVICES}",
        "Where trials run; `auto` is CUDA when a GPU is visible, else the CPU. `autotune sweep --device` overrides "
        "it (also `cuda:N`).",
    ),
    "objective": Doc(
        "`{metric, direction}`, or a list of them",
        "The metric(s) to optimise ([objective](#objective)). A list makes the study multi-objective: the "
        "leaderboard marks the Pareto front and `autotune export --rule` picks from it.",
    ),
    "constraints": Doc(
        "list of expressions (one text is a list of one)",
        "Rules over a trial's measured metrics, e.g. `peak_mem_gib <= 70`: a trial that breaks one is measured, "
        "marked infeasible and never ranked ([expressions](#expressions)).",
    ),
    "feasibility": Doc(
        "list of expressions (one text is a list of one)",
        "Rules over params, checked before a trial runs: a configuration that breaks one is never run, costs no "
        "GPU time and does not count in the budget ([expressions](#expressions)).",
    ),
    "budget": Doc(
        "mapping: `trials`, `timeout`, `trial_timeout`",
        "How long the sweep runs, and the limit for each trial ([budget](#budget)).",
    ),
    "sampler": Doc(
        "mapping: `name`, `seed`, `cost_aware`",
        "The Optuna sampler that proposes configurations ([sampler](#sampler)).",
    ),
    "params": Doc(
        "mapping: param name -> [param spec](#writing-a-param)",
        "What is searched: knobs ([knobs](#knobs)) and the workload's own parameters "
        "([workload parameters](#workload-parameters)), chosen in the order written.",
        "required (at least one)",
    ),
    "kernels": Doc(
        "list of `package.module:kernel`",
        "Triton kernels whose configs join the search ([kernels](#kernels)).",
    ),
    "finalists": Doc(
        "mapping: `top`, `compile_mode`, `inductor`",
        "After the search, its best configurations once more with Inductor's expensive options "
        "([finalists](#finalists)). Absent: no such stage.",
    ),
    "float8_filter": Doc(
        "mapping: `include`, `exclude`, each a list of module-name patterns (fnmatch)",
        "Which Linear layers `float8` converts, by their names in `model.named_modules()`: `include` exactly those "
        "it names, `exclude` never those. Unset: the layers large enough for the recipe to gain (measured on an "
        "H200), the output head left out ([float8](../knobs.md#float8-fp8-training-through-torchao)). Needs `float8` "
        "in `params`.",
    ),
    "gpus_per_trial": Doc(
        "int >= 1",
        "How many processes (one GPU each) every trial runs as, ranks of torch.distributed (NCCL on GPUs, gloo on a "
        "CPU); the trial's throughput is theirs together. `data_parallel` other than `none` needs 2 or more "
        "([data parallelism](../knobs.md#data-parallelism-ddp-and-fsdp2)).",
        "1",
    ),
}

SECTION_DOCS: dict[str, Doc] = {
    "workload.name": Doc(
        "a built-in name ({BUILTIN}) or `package.module:function`",
        "The build function. A `package.module` is imported as `python -m` would, from the folder the command runs "
        "in first.",
        "required",
    ),
    "workload.preset": Doc(
        "{PRESETS}; `llama` also {LLAMA_PRESETS}",
        "The size the build function is asked for (its `preset` argument); the table below lists each built-in's.",
    ),
    "workload.args": Doc(
        "mapping of keyword arguments",
        "Fixed arguments of the build function, never searched. A name here cannot also be a param; an argument "
        "without a default in the build function must be given here or in `params`.",
    ),
    "objective.metric": Doc(
        "a metric name ([metrics](#metrics))",
        "What to optimise; a workload may report metrics of its own besides these.",
        "required",
    ),
    "objective.direction": Doc("{DIRECTIONS}", "Whether larger or smaller is better.", "required"),
    "budget.trials": Doc(
        "int >= 1",
        "Measured trials in all, finished ones of a resumed study included. `--n-trials` overrides it. With neither "
        "`trials` nor `timeout` (here or on the command line) a sweep runs {DEFAULT_TRIALS} trials.",
    ),
    "budget.timeout": Doc(
        "a duration: `90`, `90s`, `30m`, `8h`, `1h30m`, `1.5h`",
        "Stop starting trials after this long (the finishing stages are fitted into it). `--timeout` overrides it.",
    ),
    "budget.trial_timeout": Doc(
        "a duration", "Wall-clock limit of one trial; a trial past it is killed and recorded as `timeout`."
    ),
    "sampler.name": Doc("{SAMPLERS}", "The Optuna sampler ([samplers](#samplers)); `grid` needs every param discrete."),
    "sampler.seed": Doc("int", "Seeds the sampler: the same proposals on every run. `--seed` overrides it."),
    "sampler.cost_aware": Doc(
        "`true`, `false`",
        "Propose by expected improvement per predicted second of trial. Unset: on for TPE (`tpe`, or `auto` where it "
        "resolves to TPE), off for the others. Not with `grid`.",
    ),
    "finalists.top": Doc("int >= 1", "How many of the search's best configurations (of different graphs) re-run."),
    "finalists.compile_mode": Doc(
        "{FINALIST_COMPILE_MODES}",
        "The compile mode the finalists run with, in place of their own. Without it, eager configurations are "
        "passed over.",
    ),
    "finalists.inductor": Doc(
        "mapping of Inductor options ([Inductor options](#inductor-options))",
        "Given to `torch.compile` with the mode's own options. Needs a space that compiles, or `compile_mode`. "
        "At least one of `compile_mode` and `inductor` is required.",
    ),
}

PARAM_KEY_DOCS: dict[str, Doc] = {
    "choices": Doc("non-empty list of plain values", "The values a categorical (or ordinal) param takes.", "-"),
    "ordinal": Doc(
        "`true`, `false`",
        "With `choices`: the values are ordered; the sampler searches the choice's index (the study stores the "
        "value itself).",
        "`false`",
    ),
    "low": Doc("number", "Low end of a range (inclusive). Both ends ints: an int range; else a float range.", "-"),
    "high": Doc("number", "High end of a range (inclusive).", "-"),
    "log": Doc("`true`, `false`", "Sample the range in log space (needs `low > 0`; no `step`).", "`false`"),
    "step": Doc(
        "positive int (int range) or number (float range)",
        "Grid of a range; an int range's `high - low` must be a multiple of it.",
        "1 for ints, continuous for floats",
    ),
    "default": Doc(
        "one of the param's values",
        'The value that stands for "not tuned": the first trial (PyTorch defaults) runs it and speedups are '
        "measured against it.",
        "PyTorch's value for a knob, the build function's for a workload argument, else the first choice or `low`",
    ),
    "when": Doc(
        "`{other_param: [values]}` (one value or a list)",
        "The param exists only when each named param, declared before it, has one of the values.",
        "always present",
    ),
}

WORKLOAD_PARAM_DOCS: dict[str, Doc] = {
    "resnet50.data": Doc(
        "{DATA_MODES}",
        "`synthetic`: batches made on the device; `host`: uint8 images in host memory, loaded by the "
        "trial's `DataLoader` (the data-path knobs then apply).",
    ),
    "resnet50.augment": Doc("{AUGMENTS}", "Host data: where crop, flip and normalise run."),
    "resnet50.fetch": Doc(
        "{FETCHES}", "Host data: one `__getitem__` per image, or the whole batch in one `__getitems__`."
    ),
    "gpt2.norm": Doc("{NORMS}", "LayerNorm: `nn.LayerNorm`, or autotune's Triton kernels (same parameters)."),
    "gpt2.head": Doc(
        "{HEADS}",
        "LM head + loss: whole logits then `F.cross_entropy`, or the fused chunked Triton kernel that never holds "
        "the whole logits.",
    ),
    "gpt2.data": Doc(
        "{DATA_MODES}",
        "`synthetic`: tokens made on the device; `host`: a token stream in host memory through the "
        "trial's `DataLoader`.",
    ),
    "llama.seq": Doc("int", "Tokens per sequence; unset: the preset's (64 tiny, 1024 `125m`, 2048 `1b` and `3b`)."),
    "llama.layers": Doc("int", "Decoder layers; unset: the preset's (`3b`: 16, where Llama 3.2 3B has 28)."),
    "vit.image": Doc(
        "int", "Pixels a side of the square input image; unset: the preset's (32 tiny, 224 `small` and `full`)."
    ),
    "vit.patch": Doc(
        "int", "Pixels a side of a patch, dividing `image`; unset: the preset's (8 tiny, 16 `small` and `full`)."
    ),
    "triton_matmul.BLOCK_M": Doc("int", "Rows of the output tile one program computes."),
    "triton_matmul.BLOCK_N": Doc("int", "Columns of the output tile."),
    "triton_matmul.BLOCK_K": Doc("int", "Depth of the K step."),
    "triton_matmul.num_warps": Doc("int", "Warps per program."),
    "triton_matmul.num_stages": Doc("int", "Software-pipelining stages (shared-memory buffers)."),
    "triton_matmul.GROUP_M": Doc("int", "Tiles grouped along M for L2 reuse."),
    "triton_matmul.dtype": Doc("{MATMUL_DTYPES}", "Input dtype."),
    "triton_matmul.kernel": Doc(
        "{MATMUL_KERNELS}", "The variant: the tutorial's tiled kernel, or a persistent TMA one (Hopper and newer)."
    ),
    "triton_matmul.M": Doc("int", "Problem size; give `M`, `N` and `K` together, else the preset's shape."),
    "triton_matmul.N": Doc("int", "Problem size (with `M`, `K`)."),
    "triton_matmul.K": Doc("int", "Problem size (with `M`, `N`)."),
}

INDUCTOR_DOCS: dict[str, str] = {
    "coordinate_descent_tuning": "tunes each generated kernel's block sizes by coordinate descent",
    "max_autotune": "benchmarks its matmul and conv templates against ATen and keeps the fastest",
    "max_autotune_gemm_backends": "the GEMM backends `max_autotune` picks from",
    "epilogue_fusion": "fuses pointwise work into matmul templates' epilogues",
    "shape_padding": "pads matmul shapes to sizes the tensor cores prefer",
    "triton.cudagraphs": "captures CUDA graphs (what `reduce-overhead` turns on)",
}

METRIC_DOCS: dict[str, str] = {
    "throughput": "items per second in the workload's unit (images/s, tokens/s; TFLOP/s for `triton_matmul`)",
    "step_ms_p50": "median step time, ms",
    "step_ms_p90": "90th-percentile step time, ms",
    "step_cv": "coefficient of variation of the step times",
    "peak_mem_gib": "peak device memory of the step, GiB",
    "compile_s": "warm-up time above the steady step time, s (its compile time under `torch.compile`)",
    "energy_j_per_sample": "GPU energy per sample, J (where NVML reports it)",
    "power_w_mean": "mean GPU power, W",
    "gpu_util_mean": "mean GPU utilisation, %",
    "overhead_s": "process start plus building the workload, s",
    "tflops": "achieved TFLOP/s: the training step's model FLOPs over its step time (a kernel workload's own TFLOP/s); "
    "absent where the model FLOPs could not be counted ([reading results](../results.md#tflops-and-mfu))",
    "mfu": "model FLOPs utilisation: `tflops` over the GPU's dense peak for the precision the step ran in, a fraction; "
    "absent on a CPU and on a GPU without a known peak",
}

SAMPLER_DOCS: dict[str, str] = {
    "auto": "`cmaes` for a space of ordered params only (ordinal, int, float), else `tpe` (chosen by measurement: "
    "BENCHMARKS.md)",
    "tpe": "Optuna's TPE; cost-aware unless `cost_aware: false`",
    "gp": "Optuna's Gaussian-process sampler",
    "cmaes": "CMA-ES with margin, never re-proposing a tried configuration (needs the `cmaes` package)",
    "random": "uniform random proposals",
    "grid": "every configuration of the discrete params, in order; the budget is capped by the grid's size",
}


# --- Reading the code ----------------------------------------------------------------------------------------


def _code(value: Any) -> str:
    """A value as YAML writes it, in backticks: `true`, `bf16`, `128`."""
    if isinstance(value, bool) or value is None:
        return {True: "`true`", False: "`false`", None: "`null`"}[value]
    if isinstance(value, Mapping):
        return "`{}`" if not value else "`{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}`"
    if isinstance(value, tuple | list):
        return "`[]`" if not value else "`[" + ", ".join(str(v) for v in value) + "]`"
    return f"`{value}`"


def _fill(text: str, vocab: Mapping[str, str]) -> str:
    """``text`` with each ``{NAME}`` (capitals) replaced by that vocabulary; other braces are left alone."""
    return re.sub(r"\{([A-Z_]+)\}", lambda match: vocab[match[1]], text)


def _codes(values: Iterable[Any]) -> str:
    return ", ".join(_code(v) for v in values)


def _duration(seconds: float) -> str:
    """600.0 -> `10m`, 5400.0 -> `1h30m`, 45.0 -> `45s`."""
    whole = int(seconds)
    hours, minutes, secs = whole // 3600, whole % 3600 // 60, whole % 60
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return f"`{text or '0s'}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def vocabularies() -> dict[str, str]:
    """The code's vocabularies, rendered, by the names ``Doc.values`` fields use."""
    from autotune import workloads
    from autotune.kernels import matmul
    from autotune.space.settings import DEVICES, DIRECTIONS, SAMPLERS
    from autotune.space.validate_settings import _FINALIST_COMPILE_MODES
    from autotune.sweep.options import DEFAULT_TRIALS
    from autotune.workloads import gpt2, hostdata, triton_matmul

    return {
        "DEVICES": _codes(DEVICES),
        "DIRECTIONS": _codes(DIRECTIONS),
        "SAMPLERS": _codes(SAMPLERS),
        "PRESETS": _codes(workloads.PRESETS),
        "LLAMA_PRESETS": _codes(p for p in workloads.presets(workloads.resolve("llama")) if p not in workloads.PRESETS),
        "BUILTIN": _codes(workloads.BUILTIN),
        "FINALIST_COMPILE_MODES": _codes(_FINALIST_COMPILE_MODES),
        "DEFAULT_TRIALS": str(DEFAULT_TRIALS),
        "DATA_MODES": _codes(hostdata.DATA_MODES),
        "AUGMENTS": _codes(hostdata.AUGMENTS),
        "FETCHES": _codes(hostdata.FETCHES),
        "NORMS": _codes(gpt2.NORMS),
        "HEADS": _codes(gpt2.HEADS),
        "MATMUL_DTYPES": _codes(triton_matmul.DTYPES),
        "MATMUL_KERNELS": _codes(matmul.KERNELS),
    }


def space_defaults() -> dict[str, str]:
    """What the space reader fills in for each key left out, read back from a minimal space it validates."""
    from autotune.space import FinalistsSpec, load_space

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "minimal.yaml"
        path.write_text(_MINIMAL_SPACE)
        space = load_space(path)
    objective = space.objectives[0] if len(space.objectives) == 1 else None
    budget, sampler, finalists = space.budget, space.sampler, FinalistsSpec()
    return {
        "device": _code(space.device),
        "objective": f"`{{metric: {objective.metric}, direction: {objective.direction}}}`" if objective else "-",
        "constraints": "none",
        "feasibility": "none",
        "budget": "see below",
        "sampler": "see below",
        "kernels": "none",
        "finalists": "none" if space.finalists is None else "-",
        "workload.preset": _code(space.workload.preset),
        "workload.args": _code(space.workload.args),
        "budget.trials": "unset" if budget.trials is None else _code(budget.trials),
        "budget.timeout": "unset" if budget.timeout_s is None else _duration(budget.timeout_s),
        "budget.trial_timeout": _duration(budget.trial_timeout_s),
        "sampler.name": _code(sampler.name),
        "sampler.seed": "unset" if sampler.seed is None else _code(sampler.seed),
        "sampler.cost_aware": "unset" if sampler.cost_aware is None else _code(sampler.cost_aware),
        "finalists.top": _code(finalists.top),
        "finalists.compile_mode": "unset" if finalists.compile_mode is None else _code(finalists.compile_mode),
        "finalists.inductor": "unset" if not finalists.inductor else _code(finalists.inductor),
    }


def space_sections() -> dict[str, tuple[str, ...]]:
    """Each mapping section of a space and the keys the reader accepts in it."""
    from autotune.space import validate_settings as settings

    return {
        "workload": settings._WORKLOAD_KEYS,
        "objective": settings._OBJECTIVE_KEYS,
        "budget": settings._BUDGET_KEYS,
        "sampler": settings._SAMPLER_KEYS,
        "finalists": settings._FINALISTS_KEYS,
    }


def builtin_workload_params() -> dict[str, dict[str, Any]]:
    """Each built-in workload's tunable parameters (its build function's, beyond ``preset``) with their defaults."""
    from autotune import workloads

    return {name: workloads.workload_params(workloads.resolve(name)) for name in workloads.BUILTIN}


@dataclass(frozen=True)
class ShippedKernel:
    """A Triton kernel of the package that a space can list: its import path, the params it adds, its fixed
    settings and its own feasibility rule."""

    path: str
    params: tuple[tuple[str, tuple[Any, ...]], ...]
    fixed: dict[str, Any]
    rule: str | None


def shipped_kernels() -> list[ShippedKernel]:
    """The Triton kernels of ``autotune.kernels`` that a space can list (public, tunable), with their params."""
    import autotune.kernels
    from autotune.errors import AutotuneError
    from autotune.kernels import listing

    found: list[ShippedKernel] = []
    for module_info in pkgutil.iter_modules(autotune.kernels.__path__):
        module = importlib.import_module(f"autotune.kernels.{module_info.name}")
        for name, obj in vars(module).items():
            if name.startswith("_") or not _is_autotuned(obj):
                continue
            try:
                kernel = listing.load_kernel(f"{module.__name__}:{name}")
            except AutotuneError:  # one config: nothing to choose
                continue
            params = tuple((p.name, p.values) for p in kernel.params())
            found.append(ShippedKernel(kernel.path, params, kernel.fixed(), kernel.feasibility))
    return found


def _is_autotuned(obj: Any) -> bool:
    from triton.runtime.autotuner import Autotuner

    from autotune.kernels.listing import wrapped

    return wrapped(obj, Autotuner) is not None


# --- The regions of space.md ---------------------------------------------------------------------------------


def _described(docs: Mapping[str, Any], names: Iterable[str], where: str) -> None:
    missing = [name for name in names if name not in docs]
    if missing:
        raise MissingDocs(f"describe {', '.join(missing)} in scripts/docs_reference.py ({where})")


def _top_keys(vocab: Mapping[str, str], defaults: Mapping[str, str]) -> str:
    from autotune.space.validate import _TOP_KEYS

    return _key_table(_TOP_KEYS, TOP_DOCS, "TOP_DOCS", vocab, defaults)


def _section_keys(section: str, vocab: Mapping[str, str], defaults: Mapping[str, str]) -> str:
    keys = [f"{section}.{key}" for key in space_sections()[section]]
    return _key_table(keys, SECTION_DOCS, "SECTION_DOCS", vocab, defaults)


def _key_table(
    keys: Iterable[str], docs: Mapping[str, Any], where: str, vocab: Mapping[str, str], defaults: Mapping[str, str]
) -> str:
    """The table of ``keys`` as ``docs`` (the dictionary named ``where``) describes them; every key must be there."""
    keys = list(keys)
    _described(docs, keys, where)
    rows = []
    for key in keys:
        doc = docs[key]
        default = doc.default or defaults.get(key, "unset")
        rows.append((f"`{key}`", _fill(doc.values, vocab), default, _fill(doc.doc, vocab)))
    return _table(("key", "values", "default", "what it does"), rows)


def _param_keys() -> str:
    from autotune.space.validate_params import _PARAM_KEYS

    _described(PARAM_KEY_DOCS, _PARAM_KEYS, "PARAM_KEY_DOCS")
    rows = [(f"`{key}`", PARAM_KEY_DOCS[key].values, PARAM_KEY_DOCS[key].default or "-", PARAM_KEY_DOCS[key].doc)
            for key in _PARAM_KEYS]  # fmt: skip
    return _table(("key", "values", "default", "what it does"), rows)


def _knob_values(spec: Any) -> str:
    from autotune.knobs.spec import bounds_text

    if spec.name == "inductor":
        return "Inductor options: set by `finalists.inductor`, never searched"
    if spec.name == "float8_filter":
        return "module-name patterns: set by the space's `float8_filter:`, never searched"
    if spec.choices is not None:
        return _codes(spec.choices)
    if spec.kind is float:
        return f"number {bounds_text(spec)}; a list, `{{choices}}` or a range"
    text = f"{spec.kind.__name__} >= {spec.minimum}" if spec.minimum is not None else spec.kind.__name__
    return text + (", or `none`" if spec.nullable else "") + "; a list, `{choices}` or an int range"


def _knobs() -> str:
    from autotune.knobs import DATA_KNOBS, KNOB_SPECS, Knobs

    defaults = Knobs().to_params()
    kinds = {bool: "bool", int: "int", float: "number", str: "text"}
    rows = []
    for name, spec in KNOB_SPECS.items():
        default = defaults[name]
        group = "data path" if name in DATA_KNOBS else "finalists" if name == "inductor" else "step"
        shown = "unset" if default is None else _code(default)
        rows.append((f"`{name}`", kinds.get(spec.kind, spec.kind.__name__), _knob_values(spec), shown, group, spec.doc))
    return _table(("knob", "type", "values", "default", "applies to", "what it does"), rows)


def _workloads() -> str:
    from autotune import workloads

    rows = []
    for name, params in builtin_workload_params().items():
        shown = ", ".join(f"`{p}`" for p in params) or "none"
        presets = _codes(workloads.presets(workloads.resolve(name)))
        rows.append((f"`{name}`", f"`{workloads.BUILTIN[name]}`", presets, shown))
    return _table(("workload", "build function", "presets", "its params"), rows)


def _workload_params(vocab: Mapping[str, str]) -> str:
    every = builtin_workload_params()
    _described(WORKLOAD_PARAM_DOCS, [f"{w}.{p}" for w, params in every.items() for p in params], "WORKLOAD_PARAM_DOCS")
    rows = []
    for workload, params in every.items():
        for name, default in params.items():
            doc = WORKLOAD_PARAM_DOCS[f"{workload}.{name}"]
            shown = "unset" if default is None else _code(default)
            rows.append((f"`{workload}`", f"`{name}`", _fill(doc.values, vocab), shown, doc.doc))
    return _table(("workload", "param", "values", "default", "what it does"), rows)


def _kernels() -> str:
    rows = []
    for kernel in shipped_kernels():
        for name, values in kernel.params:
            fixed = ", ".join(f"{k}={v}" for k, v in kernel.fixed.items()) or "-"
            rule = f"`{kernel.rule}`" if kernel.rule else "-"
            rows.append((f"`{kernel.path}`", f"`{name}`", _codes(values), fixed, rule))
    return _table(("kernel (in `kernels:`)", "param it adds", "values (ordinal)", "fixed", "its own rule"), rows)


def _inductor() -> str:
    from autotune.knobs import inductor

    _described(INDUCTOR_DOCS, inductor.ALLOWED, "INDUCTOR_DOCS")
    rows = []
    for name in inductor.ALLOWED:
        if name == "max_autotune_gemm_backends":
            values = "comma-separated, from " + _codes(inductor.GEMM_BACKENDS)
        else:
            values = "`true`, `false`"
        rows.append((f"`{name}`", values, INDUCTOR_DOCS[name]))
    return _table(("option", "values", "what Inductor does"), rows)


def _metrics() -> str:
    from autotune.space.settings import METRICS

    _described(METRIC_DOCS, METRICS, "METRIC_DOCS")
    return _table(("metric", "what it measures"), [(f"`{m}`", METRIC_DOCS[m]) for m in METRICS])


def _samplers() -> str:
    from autotune.space.settings import SAMPLERS

    _described(SAMPLER_DOCS, SAMPLERS, "SAMPLER_DOCS")
    return _table(("sampler", "what it is"), [(f"`{s}`", SAMPLER_DOCS[s]) for s in SAMPLERS])


def _functions() -> str:
    from autotune.expr import _ARITY, FUNCTIONS

    rows = []
    for name in FUNCTIONS:
        fewest, most = _ARITY[name]
        count = f"{fewest}" if fewest == most else f"{fewest} or more" if most is None else f"{fewest} to {most}"
        rows.append((f"`{name}`", count))
    return _table(("function", "arguments"), rows)


def space_regions() -> dict[str, str]:
    """Every generated region of space.md, by name."""
    vocab, defaults = vocabularies(), space_defaults()
    regions: dict[str, Callable[[], str]] = {
        "top-level-keys": lambda: _top_keys(vocab, defaults),
        "workload-keys": lambda: _section_keys("workload", vocab, defaults),
        "workloads": _workloads,
        "objective-keys": lambda: _section_keys("objective", vocab, defaults),
        "metrics": _metrics,
        "functions": _functions,
        "budget-keys": lambda: _section_keys("budget", vocab, defaults),
        "sampler-keys": lambda: _section_keys("sampler", vocab, defaults),
        "samplers": _samplers,
        "param-keys": _param_keys,
        "knobs": _knobs,
        "workload-params": lambda: _workload_params(vocab),
        "kernel-params": _kernels,
        "finalists-keys": lambda: _section_keys("finalists", vocab, defaults),
        "inductor-options": _inductor,
    }
    return {name: make() for name, make in regions.items()}


def render_space(text: str, regions: Mapping[str, str]) -> str:
    """``text`` with each generated region's content replaced; a region the page lacks, or one it has that is not
    generated, raises ValueError."""
    out: list[str] = []
    position, seen = 0, list[str]()
    for begin in _BEGIN.finditer(text):
        name = begin["name"]
        end = text.find(_END.format(name=name), begin.end())
        if end < 0:
            raise ValueError(f"{SPACE_MD.name}: GENERATED region {name!r} has no end marker")
        if name not in regions:
            raise ValueError(f"{SPACE_MD.name}: no generated region is called {name!r}")
        out += [text[position : begin.end()], regions[name]]
        position, seen = end, [*seen, name]
    missing = [name for name in regions if name not in seen]
    if missing:
        raise ValueError(f"{SPACE_MD.name} lacks the generated region(s) {', '.join(missing)}")
    return "".join([*out, text[position:]])


# --- cli.md ---------------------------------------------------------------------------------------------------


def _param_type(param: click.Parameter) -> str:
    """An option's value in words: flag, a choice, a range, a duration, a number, text, a path; its metavar too."""
    kind = param.type
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    if isinstance(kind, click.Choice):
        return ", ".join(f"`{c}`" for c in kind.choices)
    if isinstance(kind, click.IntRange | click.FloatRange):
        word = "int" if isinstance(kind, click.IntRange) else "number"
        if kind.min is not None and kind.max is not None:
            return f"{word} in [{kind.min}, {kind.max}]"
        return f"{word} >= {kind.min}" if kind.min is not None else f"{word} <= {kind.max}"
    if getattr(param.callback, "__name__", "") == "_duration":  # the CLI's duration parser
        text = "duration (`90s`, `30m`, `8h`, `1h30m`)"
    elif isinstance(kind, click.Path):
        text = "path"
    else:
        text = {click.INT: "int", click.FLOAT: "number", click.STRING: "text", click.BOOL: "bool"}.get(kind, kind.name)
    return f"`{param.metavar}` ({text})" if param.metavar else text


def _default(param: click.Option, ctx: click.Context) -> str:
    if not param.show_default:
        return "-"
    default = param.get_default(ctx, call=False)
    if default is None or (param.is_flag and default is False):
        return "-"
    if param.is_flag and param.secondary_opts:
        return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
    return f"`{default}`"


def _examples_as_code(text: str) -> str:
    """A help text's ``Example: autotune ...`` lines with the command in backticks."""
    return re.sub(r"^Example: (autotune .+)$", r"Example: `\1`", text, flags=re.MULTILINE)


def _argument(argument: click.Argument) -> str:
    """```WORKLOAD` (required)``, as click's usage line names it (its metavar, or its name in capitals)."""
    name = argument.metavar or (argument.name or "").upper()
    if argument.nargs != 1 and not name.endswith("..."):
        name += "..."
    many = ", one or more" if argument.nargs == -1 else ""
    return f"`{name}`" + (f" (required{many})" if argument.required else "")


def _command_section(name: str, command: click.Command) -> str:
    ctx = click.Context(command, info_name=f"autotune {name}")
    usage = " ".join(["autotune", name, *command.collect_usage_pieces(ctx)])
    help_text = _examples_as_code(inspect.cleandoc(command.help or ""))
    lines = [f"## `autotune {name}`", "", "```text", usage, "```", "", help_text, ""]
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if arguments:
        lines += ["Arguments: " + ", ".join(_argument(p) for p in arguments), ""]
    rows = []
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        opts = " / ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
        kind = _param_type(param) + (" (repeatable)" if param.multiple else "")
        required = " Required." if param.required else ""
        rows.append((opts, kind, _default(param, ctx), (param.help or "") + required))
    rows.append(("`-h` / `--help`", "flag", "-", "Show the command's help and exit."))
    lines.append(_table(("option", "value", "default", "what it does"), rows))
    return "\n".join(lines)


def render_cli() -> str:
    """cli.md, whole: every command of ``autotune``, its synopsis, help and options, from the click CLI itself."""
    from autotune.cli import cli

    group_help = inspect.cleandoc(cli.help or "")
    parts = [
        "<!-- Generated by scripts/docs_reference.py from autotune/cli.py: edit those, then run the script. -->",
        "",
        "# Command-line reference",
        "",
        group_help,
        "",
        "`autotune --version` prints the version; `autotune -h` (or `--help`) lists the commands, and "
        "`autotune COMMAND -h` shows a command's options. `python3 -m autotune` is the same command. "
        "The search space a sweep reads is described in [space.md](space.md).",
        "",
        "Commands: " + ", ".join(f"[`{name}`](#autotune-{name})" for name in cli.commands) + ".",
        "",
    ]
    for name, command in cli.commands.items():
        parts.append(_command_section(name, command))
    return "\n".join(parts).rstrip("\n") + "\n"


# --- Entry point ------------------------------------------------------------------------------------------


def rendered() -> dict[Path, str]:
    """Each generated file's expected content."""
    return {SPACE_MD: render_space(SPACE_MD.read_text(encoding="utf-8"), space_regions()), CLI_MD: render_cli()}


def stale() -> list[Path]:
    """The generated files whose content differs from what the code generates now (or that are missing)."""
    return [path for path, text in rendered().items() if not path.exists() or path.read_text(encoding="utf-8") != text]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 where a file is out of date; write nothing")
    args = parser.parse_args(argv)
    expected = rendered()
    outdated = [p for p, text in expected.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    for path in outdated:
        if args.check:
            print(f"{path.relative_to(REPO)} is out of date: run python scripts/docs_reference.py", file=sys.stderr)
        else:
            path.write_text(expected[path], encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    return 1 if args.check and outdated else 0


if __name__ == "__main__":
    sys.exit(main())
