"""The float8 knobs: FP8 training of a model's ``nn.Linear`` layers through torchao, and which layers.

- ``float8``: ``none`` (the default), or the torchao recipe the layers train with: ``tensorwise`` (one scale per
  tensor, cuBLAS's FP8 GEMM), ``rowwise`` (one scale per row, CUTLASS's), ``rowwise_with_gw_hp`` (rowwise, the
  weight gradient in bf16). It needs ``precision=bf16`` (FP8 GEMMs return bf16) and, on a GPU, compute capability
  8.9 or more (Ada, Hopper, Blackwell). On a CPU torchao emulates the FP8 GEMMs, so CPU trials and tests run it; a
  GPU never emulates.
- ``float8_filter``: which Linear layers are converted (:class:`LayerFilter`), set by the space's ``float8_filter:``
  key and carried by a trial's params to ``autotune export`` and ``cfg.apply()``. Unset: the layers large enough
  for the recipe to gain (:data:`MIN_WEIGHT`, measured), the output head left out (FP8 on the logits costs
  accuracy for a small share of the step). ``include`` patterns choose layers by name instead; ``exclude``
  patterns are never converted.

:func:`convert` swaps the chosen layers for torchao's ``Float8Linear`` in place, before the model is compiled
(torchao's and torchtitan's order: convert, then ``torch.compile``); the layers keep their parameters, so an
optimizer made before :func:`autotune.knobs.apply` trains them still. torchao is an optional extra
(``pip install 'autotune[fp8]'``) and is imported only here, only when a model is converted or looked at for it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.metadata
import importlib.util
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from autotune.errors import AutotuneError, InvalidCombination
from autotune.knobs.spec import KnobSpec
from autotune.quiet import quiet_torchao_import

__all__ = [
    "FLOAT8",
    "FLOAT8_FILTER",
    "FLOAT8_RECIPES",
    "INSTALL",
    "MIN_CAPABILITY",
    "MIN_WEIGHT",
    "LayerFilter",
    "check",
    "chosen_layers",
    "convert",
    "converted_share",
    "gpu_lacks_float8",
    "head_layers",
    "nvml_lacks_float8",
    "torchao_missing",
]

FLOAT8_RECIPES = ("none", "tensorwise", "rowwise", "rowwise_with_gw_hp")
MIN_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (8.9), Hopper (9.0) and newer
MIN_TORCHAO = (0, 18)  # Float8LinearConfig.from_recipe_name with these recipes, and the auto filter per recipe
INSTALL = "pip install 'autotune[fp8]'"
# The last name part of a module that is the model's output head, whatever its size: HF (lm_head, classifier),
# torchtitan's Llama (output), timm (head).
HEAD_NAMES = ("lm_head", "output", "head", "classifier")
# FP8 GEMMs (torch._scaled_mm) need both dimensions of the weight to be multiples of 16; a layer named by an
# ``include`` pattern that is not is left in bf16 rather than fail.
FP8_MULTIPLE = 16
# The smallest weight (in_features x out_features) on which each recipe gained, measured on an H200 with
# scripts/float8_layer_benchmark.py: one Linear's compiled forward and backward over 16,384 tokens, against bf16
# (BENCHMARKS.md). tensorwise: 1.14x at 3072x3072, but 0.63x at 2048x2048, a layer torchao's own rule (tuned on
# H100s) converts. rowwise: 1.19x at 3072x8192 and 1.36x at 8192x8192, but 0.94x at 3072x3072 and 0.92x at 8192 in,
# 2048 out. rowwise_with_gw_hp runs rowwise's GEMMs for the output and the input gradient, so rowwise's bound.
MIN_WEIGHT = {"tensorwise": 3072 * 3072, "rowwise": 3072 * 8192, "rowwise_with_gw_hp": 3072 * 8192}
_SEPARATORS = (",", ";", "=")  # the text form's own: a pattern may not contain them

FLOAT8 = KnobSpec(
    "float8", str, FLOAT8_RECIPES, "FP8 training of the Linear layers, torchao's recipe (needs precision=bf16)"
)


@dataclass(frozen=True)
class LayerFilter:
    """Which Linear layers ``float8`` converts, by their names in ``model.named_modules()`` (fnmatch patterns).

    No ``include``: the layers large enough for the recipe to gain (:data:`MIN_WEIGHT`), the output head left out
    (:func:`head_layers`). With ``include``: exactly the layers whose name matches one of its patterns (the size
    and head rules are not applied). ``exclude``: never these, in either case.

    In a trial's params the filter is one text, ``include=*.mlp.*,*.attn.*;exclude=lm_head`` (params are plain
    values); a mapping ``{include: [...], exclude: [...]}`` (the YAML form) and that text are both read.
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def read(cls, value: Any) -> LayerFilter:
        """A filter from its mapping or text form; :class:`AutotuneError` says what is wrong with it."""
        raw = value if isinstance(value, Mapping) else _from_text(str(value))
        unknown = sorted(str(key) for key in raw if key not in ("include", "exclude"))
        if unknown:
            raise AutotuneError(f"float8_filter: unknown key(s) {', '.join(unknown)} (keys: include, exclude)")
        return cls(_patterns(raw.get("include"), "include"), _patterns(raw.get("exclude"), "exclude"))

    def to_text(self) -> str | None:
        """The params form; None for the empty filter (the default rule)."""
        parts = [f"{key}={','.join(patterns)}" for key, patterns in self.to_mapping().items()]
        return ";".join(parts) or None

    def to_mapping(self) -> dict[str, list[str]]:
        """The YAML form, empty keys left out."""
        both = {"include": list(self.include), "exclude": list(self.exclude)}
        return {key: patterns for key, patterns in both.items() if patterns}

    def excludes(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.exclude)

    def includes(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.include)


def _from_text(text: str) -> dict[str, list[str]]:
    pairs: dict[str, list[str]] = {}
    for item in (part.strip() for part in text.split(";")):
        if not item:
            continue
        key, equals, patterns = item.partition("=")
        if not equals:
            raise AutotuneError(f"float8_filter: {item!r} is not key=patterns (e.g. include=*.mlp.*;exclude=lm_head)")
        pairs[key.strip()] = [p.strip() for p in patterns.split(",") if p.strip()]
    return pairs


def _patterns(raw: Any, key: str) -> tuple[str, ...]:
    """The patterns of ``include`` or ``exclude``: a list of texts (one text is a list of one)."""
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple) or not all(isinstance(item, str) and item.strip() for item in items):
        raise AutotuneError(f"float8_filter.{key}: expected a list of module-name patterns, e.g. ['*.mlp.*']")
    for item in items:
        if any(separator in item for separator in _SEPARATORS):
            raise AutotuneError(f"float8_filter.{key}: {item!r}: a module-name pattern has no ',', ';' or '='")
    return tuple(item.strip() for item in items)


FLOAT8_FILTER = KnobSpec(
    "float8_filter",
    str,
    None,
    "which Linear layers float8 converts: the space's float8_filter (None: by size, the output head left out)",
    nullable=True,
    parse=lambda value: LayerFilter.read(value).to_text(),
)


# -- what float8 needs --------------------------------------------------------------------------------------------


def torchao_missing() -> str | None:
    """Why torchao cannot give this process float8 training (not installed, too old); None where it can. Looks the
    package up without importing it."""
    try:
        found = importlib.util.find_spec("torchao") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return f"float8 needs torchao, which is not installed: {INSTALL}"
    try:
        version = importlib.metadata.version("torchao")
    except importlib.metadata.PackageNotFoundError:
        return None  # a source tree on the path: its version is its own to know
    numbers = tuple(int(part) for part in version.split("+")[0].split(".")[:2] if part.isdigit())
    if numbers < MIN_TORCHAO:
        least = ".".join(map(str, MIN_TORCHAO))
        return f"float8 needs torchao {least} or newer, this machine has {version}: {INSTALL}"
    return None


def gpu_lacks_float8(device: torch.device | str = "cuda") -> str | None:
    """Why the GPU ``device`` has no FP8 tensor cores (capability under 8.9); None where it has them."""
    return _lacking(torch.cuda.get_device_name(device), torch.cuda.get_device_capability(device))


def nvml_lacks_float8(device: str) -> str | None:
    """:func:`gpu_lacks_float8` for a process that must not touch CUDA (a sweep's, ``autotune validate``), by NVML:
    ``device`` is ``cuda`` or ``cuda:N`` as trials name it. None also where NVML cannot say (no driver, no such GPU):
    then the trial's own check speaks. NVML numbers GPUs in PCI order, CUDA by default fastest first: on a box of
    one GPU model, the usual one, both find the same capability."""
    index = int(device.partition(":")[2] or 0)
    visible = [part.strip() for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    if visible:
        if index >= len(visible) or not visible[index].isdigit():
            return None  # a GPU named by UUID, or none: leave it to the trial
        index = int(visible[index])
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        capability = tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle))
        name = pynvml.nvmlDeviceGetName(handle)
    except Exception:  # no driver, no library, no such GPU
        return None
    return _lacking(str(name), (int(capability[0]), int(capability[1])))


def _lacking(name: str, capability: tuple[int, int]) -> str | None:
    if capability >= MIN_CAPABILITY:
        return None
    least, shown = ".".join(map(str, MIN_CAPABILITY)), ".".join(map(str, capability))
    return f"float8 needs a GPU of compute capability {least} or more (Ada, Hopper); {name} has {shown}"


def check(recipe: str, precision: str, device_type: str) -> None:
    """Raise :class:`InvalidCombination` where ``float8=recipe`` cannot run: another precision than bf16, no torchao,
    a GPU without FP8."""
    if recipe == "none":
        return
    if precision != "bf16":
        raise InvalidCombination(
            f"float8={recipe} needs precision=bf16, not {precision} (in a space: float8: "
            "{choices: [none, ...], when: {precision: [bf16]}})"
        )
    missing = torchao_missing()
    if missing is not None:
        raise InvalidCombination(missing)
    if device_type == "cuda" and (lacking := gpu_lacks_float8()) is not None:
        raise InvalidCombination(lacking)


# -- which layers ---------------------------------------------------------------------------------------------------


def _linears(model: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Linear]]:
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            yield name, module


def head_layers(model: torch.nn.Module) -> set[str]:
    """The output head's Linear layers: those named like one (:data:`HEAD_NAMES`), and the last Linear the model
    registers (a decoder's vocabulary projection, a classifier's last layer)."""
    names = [name for name, _ in _linears(model)]
    heads = {name for name in names if name.rpartition(".")[2] in HEAD_NAMES}
    return heads | set(names[-1:])


def _large_enough(linear: torch.nn.Linear, recipe: str) -> bool:
    return _fits_fp8(linear) and linear.in_features * linear.out_features >= MIN_WEIGHT[recipe]


def _float8_api() -> Any:
    """``torchao.float8``, imported on first use (torchao is an optional extra), its import-time chatter quieted."""
    with quiet_torchao_import():
        import torchao.float8

    return torchao.float8


def _fits_fp8(linear: torch.nn.Linear) -> bool:
    return linear.in_features % FP8_MULTIPLE == 0 and linear.out_features % FP8_MULTIPLE == 0


def chosen_layers(model: torch.nn.Module, recipe: str, layer_filter: LayerFilter) -> list[str]:
    """The names of the Linear layers ``recipe`` converts under ``layer_filter``, in the model's order."""
    if layer_filter.include:
        picked = [name for name, linear in _linears(model) if layer_filter.includes(name) and _fits_fp8(linear)]
    else:
        heads = head_layers(model)
        picked = [name for name, linear in _linears(model) if name not in heads and _large_enough(linear, recipe)]
    return [name for name in picked if not layer_filter.excludes(name)]


def converted_share(model: torch.nn.Module, recipe: str = "tensorwise") -> float:
    """The share of the model's Linear FLOPs (in x out per token, every layer seeing every token) in the layers
    ``recipe`` converts by the default filter; 0.0 for a model without Linear layers. Works on the ``meta`` device."""
    sizes = {name: linear.in_features * linear.out_features for name, linear in _linears(model)}
    total = sum(sizes.values())
    if not total:
        return 0.0
    return sum(sizes[name] for name in chosen_layers(model, recipe, LayerFilter())) / total


# -- converting -----------------------------------------------------------------------------------------------------


def convert(
    model: torch.nn.Module, recipe: str, layer_filter: LayerFilter, device_type: str
) -> tuple[torch.nn.Module, tuple[str, ...]]:
    """Swap the chosen Linear layers of ``model`` for torchao's float8 ones, in place; return the model (a new one
    only where ``model`` is itself a Linear) and the names of the layers converted. Emulated on a CPU only."""
    if recipe == "none":
        return model, ()
    missing = torchao_missing()
    if missing is not None:
        raise AutotuneError(missing)
    api = _float8_api()
    chosen = set(chosen_layers(model, recipe, layer_filter))
    emulate = device_type != "cuda"  # no FP8 GEMM on a CPU; a GPU always runs the real one
    config = dataclasses.replace(api.Float8LinearConfig.from_recipe_name(recipe), emulate=emulate)
    model = api.convert_to_float8_training(model, config=config, module_filter_fn=lambda _, name: name in chosen)
    if emulate:
        _autocast_inputs_on_cpu(model, chosen)
    return model, tuple(name for name, _ in model.named_modules() if name in chosen)


def _autocast_inputs_on_cpu(model: torch.nn.Module, names: set[str]) -> None:
    """Cast the converted layers' inputs to the CPU's autocast dtype, as torchao's ``Float8Linear.forward`` does for
    the GPU's only (it reads ``torch.is_autocast_enabled()``, CUDA's): under CPU autocast its input would stay fp32
    while its GEMM ran in bf16, and ``rowwise_with_gw_hp``'s bf16 weight gradient would fail on the dtype mismatch.
    So an emulated step computes in the dtypes of the GPU's."""

    def cast(_module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if not torch.is_autocast_enabled("cpu"):
            return None
        dtype = torch.get_autocast_dtype("cpu")
        return tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)

    for name, module in model.named_modules():
        if name in names:
            module.register_forward_pre_hook(cast)
