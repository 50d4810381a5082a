"""Regional compilation's blocks: a model's repeated blocks, named or found.

``compile_scope=blocks`` (a knob, :mod:`autotune.knobs.compile`) compiles each repeated block of a model in place
with ``block.compile(...)`` (:func:`autotune.knobs.compile.compile_blocks`) instead of wrapping the whole model in
``torch.compile`` (PyTorch's regional compilation recipe); activation checkpointing wraps the same blocks
(:mod:`autotune.knobs.checkpointing`). Dynamo compiles the first block's forward; structurally identical blocks pass
its guards (their parameters are the graph's inputs, torch >= 2.5) and reuse the compiled code, so a 12-layer
transformer compiles one layer, not twelve. What lies outside the blocks (embeddings, head, loss) runs eager, and the
graph breaks between blocks: a little throughput traded for much less compile. The model stays what it was: the same
class, the same ``state_dict`` keys (no ``_orig_mod.`` prefix), each block a module whose calls are compiled.

Which blocks, in this order:

1. **named by the model**: ``model._repeated_blocks``, class names (the convention of Hugging Face diffusers'
   models, so theirs work as they are): every submodule of one of those classes, outermost only. A Hugging Face
   transformers model names its layers in ``_no_split_modules`` (the modules its ``device_map`` never splits): those
   of its classes that occur more than once are taken the same way. Its decoder layers differ in one plain
   attribute, their ``layer_idx`` (which the forward reads only with a KV cache), so the search below would pass
   them over for two identical norms inside one layer;
2. **found**: among the children of each module, the largest set of structurally identical ones: the same class,
   the same plain attributes and constructor arguments (``extra_repr``), the same parameter and buffer shapes and
   dtypes, and children identical in the same way. Identical blocks share one compiled graph; blocks that differ
   (a ResNet stage's first bottleneck, wider stages) would each compile their own, which is what this scope is
   there to avoid. A tie goes to the larger block (more parameters: fewer, bigger regions);
3. **none**: the model has no repeated blocks. :func:`autotune.knobs.apply` then compiles the whole model and
   records ``compile_scope`` as a no-op knob: the knob changed nothing, as ``memory_format`` does on a model
   without 4-D weights.

A block is a module with parameters whose ``forward`` is not torch's own: ``block.compile()`` compiles the calls
of the module it is given, and Dynamo skips torch's code there (an ``nn.Sequential`` of layers compiled so would
silently stay eager), while torch.nn's layers (Linear, LayerNorm ...) are one operation each, nothing to fuse.

``torch.compiler.nested_compile_region`` (in torch 2.11 and 2.13) is the other way to reuse a block's compile: the
whole model compiled, each block's forward marked as a region traced once. Measured on an H100 (torch 2.11, GPT-2
124M training step, batch 16, bf16, fresh caches; first 3 steps, then the steady step): whole model 30.4 s and
48.22 ms; blocks one by one 10.6 s and 52.97 ms; whole model with nested regions 21.6 s and 48.34 ms (eager: 54.96
ms). It keeps the whole model's speed for 0.71 of its compile, where this scope pays 0.35 for a slower step; it is
not used here (it needs each block's ``forward`` replaced on the instance), and would be a third scope of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["Blocks", "find_blocks", "signature"]

_PLAIN = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class Blocks:
    """The repeated blocks of a model: ``modules`` with their qualified ``names``; ``how`` they were chosen
    (``named``: the model's ``_repeated_blocks``; ``found``: the largest set of identical children), or, when
    there are none, ``reason`` says why."""

    modules: tuple[nn.Module, ...] = ()
    names: tuple[str, ...] = ()
    how: str = ""
    reason: str = ""

    def __len__(self) -> int:
        return len(self.modules)

    def describe(self) -> str:
        """``12 x Block (blocks.0 .. blocks.11, found)``, or why there are none."""
        if not self.modules:
            return self.reason
        classes = sorted({type(module).__name__ for module in self.modules})
        where = self.names[0] if len(self.names) == 1 else f"{self.names[0]} .. {self.names[-1]}"
        return f"{len(self.modules)} x {'/'.join(classes)} ({where}, {self.how})"


def find_blocks(model: nn.Module) -> Blocks:
    """The blocks ``compile_scope=blocks`` compiles: named by the model, else found (see the module docstring)."""
    named = getattr(model, "_repeated_blocks", None)
    if named:
        return _named_blocks(model, (named,) if isinstance(named, str) else tuple(named))
    layers = _transformers_layers(model)
    if layers and (blocks := _named_blocks(model, layers)):
        return blocks
    return _found_blocks(model)


def signature(module: nn.Module) -> tuple[Any, ...]:
    """What makes two modules structurally identical (the same compiled graph serves both), as a hashable value."""
    return _Signatures().of(module)


def _transformers_layers(model: nn.Module) -> tuple[str, ...]:
    """The classes a Hugging Face transformers model lists in ``_no_split_modules`` that occur in it more than once
    (its layers; an embedding listed there is one module, no block)."""
    listed = getattr(model, "_no_split_modules", None)
    if not listed or isinstance(listed, str):
        return ()
    counts = Counter(type(module).__name__ for module in model.modules())
    return tuple(name for name in sorted(map(str, listed)) if counts[name] > 1)


def _named_blocks(model: nn.Module, classes: tuple[str, ...]) -> Blocks:
    inside: set[int] = set()  # modules within a block already taken: outermost blocks only
    modules: list[nn.Module] = []
    names: list[str] = []
    for name, module in model.named_modules():
        if module is model or id(module) in inside or type(module).__name__ not in classes:
            continue
        if not _can_be_block(module):
            named = f"{type(model).__name__}._repeated_blocks names {type(module).__name__}"
            return Blocks(reason=f"{named}: {_NOT_A_BLOCK}")
        modules.append(module)
        names.append(name)
        inside.update(id(sub) for sub in module.modules())
    if not modules:
        listed = ", ".join(classes)
        return Blocks(reason=f"{type(model).__name__}._repeated_blocks names {listed}, but the model has none")
    return Blocks(tuple(modules), tuple(names), "named")


def _found_blocks(model: nn.Module) -> Blocks:
    signatures = _Signatures()
    best: tuple[tuple[int, int, int], list[tuple[str, nn.Module]]] | None = None
    order = 0
    for parent_name, parent in model.named_modules():
        groups: dict[tuple[Any, ...], list[tuple[str, nn.Module]]] = {}
        for child_name, child in parent.named_children():
            if _can_be_block(child):
                qualified = f"{parent_name}.{child_name}" if parent_name else child_name
                groups.setdefault(signatures.of(child), []).append((qualified, child))
        for group in groups.values():
            order += 1
            if len(group) < 2:
                continue
            size = sum(p.numel() for p in group[0][1].parameters())
            rank = (len(group), size, -order)  # the most blocks; then the largest; then the first found
            if best is None or rank > best[0]:
                best = (rank, group)
    if best is None:
        return Blocks(reason=f"{type(model).__name__} has no repeated blocks (no two identical modules of its own)")
    names, modules = zip(*best[1], strict=True)
    return Blocks(tuple(modules), tuple(names), "found")


_NOT_A_BLOCK = "a block needs parameters and a forward of its own (torch's, e.g. nn.Sequential's, stays eager)"


def _can_be_block(module: nn.Module) -> bool:
    """A module with parameters whose forward is not torch's (see the module docstring)."""
    forward = getattr(type(module), "forward", None)
    own = getattr(forward, "__module__", None) or "torch."
    return not own.startswith("torch.") and next(module.parameters(), None) is not None


class _Signatures:
    """Structural signatures, each module's computed once (a model's walk asks for every subtree)."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, ...]] = {}

    def of(self, module: nn.Module) -> tuple[Any, ...]:
        key = id(module)
        if key not in self._memo:
            self._memo[key] = (
                type(module),
                module.extra_repr(),
                tuple(_plain_attributes(module)),
                tuple((name, *_tensor_key(p), p.requires_grad) for name, p in module.named_parameters(recurse=False)),
                tuple((name, *_tensor_key(b)) for name, b in module.named_buffers(recurse=False)),
                tuple((name, self.of(child)) for name, child in module.named_children()),
            )
        return self._memo[key]


def _plain_attributes(module: nn.Module) -> Iterator[tuple[str, Any]]:
    """The module's public plain attributes (``heads``, ``stride`` ...): Dynamo guards on them."""
    for name, value in sorted(vars(module).items()):
        plain = isinstance(value, _PLAIN) or (isinstance(value, tuple) and all(isinstance(v, _PLAIN) for v in value))
        if plain and not name.startswith("_"):
            yield name, value


def _tensor_key(tensor: torch.Tensor) -> tuple[Any, ...]:
    return tuple(tensor.shape), tensor.dtype, tensor.device.type
