"""The activation checkpointing knobs: ``activation_checkpointing`` (which of a block's activations the backward
recomputes instead of keeping) and ``activation_memory_budget`` (how much of them the compiler keeps).

``activation_checkpointing`` wraps the forward of each of the model's repeated blocks (the very blocks
``compile_scope=blocks`` compiles, found by :func:`autotune.knobs.regional.find_blocks`) in
``torch.utils.checkpoint`` (non-reentrant):

- ``none``: every activation the backward needs is kept from the forward (PyTorch's default);
- ``full``: a block keeps its inputs only, and the backward runs the block's forward again;
- ``selective``: a block keeps the outputs of its matmuls and attention (:data:`SAVED_OPS`), the dearest ops to run
  again, and recomputes the rest (norms, activations, element-wise ops), as torchtitan's selective checkpointing
  does (``torch.utils.checkpoint.create_selective_checkpoint_contexts``).

Less kept means a lower peak, and a larger batch may fit (:mod:`autotune.sweep.proposals.expert_choice` knows it);
what it costs is the recomputation in every backward. The wrapping happens before the compile, so ``torch.compile``
(whole model or ``compile_scope=blocks``) traces the checkpoint and its partitioner honours it; autocast runs
inside, and the checkpoint replays the forward's autocast state. The block stays what it was (its class, its
``state_dict`` keys): only the instance's ``forward`` is wrapped. A model without repeated blocks cannot be
checkpointed so: :func:`checkpoint_blocks` raises :class:`~autotune.errors.AutotuneError` naming why (a trial's
status ``invalid``).

``activation_memory_budget`` is ``torch._functorch.config.activation_memory_budget``: the share of the default's
saved activations the compiler's min-cut partitioner may keep (1.0, the default: Inductor's own choice; lower: it
recomputes the cheapest ops until the rest fit). It acts on compiled graphs only: without a compile it is an
invalid combination. It is set around each training step (:meth:`autotune.knobs.stepcontext.StepContext.autocast`),
where the compiles of this model happen, and restored after, so it reaches no other model of the process.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

from autotune.errors import AutotuneError, InvalidCombination
from autotune.knobs import regional
from autotune.knobs.spec import KnobSpec

__all__ = [
    "ACTIVATION_CHECKPOINTING",
    "ACTIVATION_MEMORY_BUDGET",
    "CHECKPOINTING_MODES",
    "DEFAULT_BUDGET",
    "SAVED_OPS",
    "check",
    "checkpoint_blocks",
    "memory_budget",
]

CHECKPOINTING_MODES = ("none", "full", "selective")
DEFAULT_BUDGET = 1.0  # functorch's own default: the partitioner keeps what runs fastest

ACTIVATION_CHECKPOINTING = KnobSpec(
    "activation_checkpointing",
    str,
    CHECKPOINTING_MODES,
    "recompute the repeated blocks' activations in backward: all (full), all but matmuls and attention (selective)",
)
ACTIVATION_MEMORY_BUDGET = KnobSpec(
    "activation_memory_budget",
    float,
    None,
    "share of saved activations the compiler keeps, recomputing the rest (1.0: Inductor's default; compiled only)",
    minimum=0.0,
    maximum=1.0,
)

_aten = torch.ops.aten
# What selective checkpointing keeps (torchtitan's list): matmul and attention outputs, dear to compute again and
# small next to the element-wise intermediates around them. An op a torch build lacks is left out.
SAVED_OPS: tuple[Any, ...] = tuple(
    getattr(_aten, name).default
    for name in (
        "mm",
        "addmm",
        "bmm",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
    )
    if hasattr(_aten, name)
)
# The keywords a Hugging Face transformers layer takes its KV cache by.
_CACHE_KEYWORDS = ("past_key_values", "past_key_value", "layer_past", "cache")
# Marks a forward wrapped here: applying the knobs again to the same model wraps the original, not the wrapper.
_ORIGINAL = "_autotune_unwrapped_forward"


def check(budget: float, compile_mode: str) -> None:
    """Raise :class:`InvalidCombination` for a memory budget with no compiler to give it to."""
    if budget != DEFAULT_BUDGET and compile_mode == "none":
        raise InvalidCombination(
            f"activation_memory_budget={budget:g} needs a compile_mode other than none: the budget is the compiler's "
            "(in a space: activation_memory_budget: {choices: [...], when: {compile_mode: [default, ...]}})"
        )


def checkpoint_blocks(blocks: regional.Blocks, mode: str) -> regional.Blocks | None:
    """Wrap the forward of each of a model's repeated ``blocks`` (:func:`autotune.knobs.regional.find_blocks`) in
    ``torch.utils.checkpoint`` as ``mode`` says; return the blocks (None for ``none``). Raises AutotuneError when the
    model has no repeated blocks."""
    if mode == "none":
        return None
    if not blocks:
        raise AutotuneError(f"activation_checkpointing={mode} needs repeated blocks: {blocks.reason}")
    context_fn = _selective_contexts if mode == "selective" else None
    for block in blocks.modules:
        original = getattr(block.forward, _ORIGINAL, block.forward)
        wrapped = _checkpointed(original, context_fn)
        setattr(wrapped, _ORIGINAL, original)
        block.forward = wrapped  # the instance's own: its class stays the same
    return blocks


def _selective_contexts() -> tuple[contextlib.AbstractContextManager[Any], contextlib.AbstractContextManager[Any]]:
    """The forward and recompute contexts of selective checkpointing: :data:`SAVED_OPS` kept, the rest recomputed."""
    return create_selective_checkpoint_contexts(list(SAVED_OPS))


def _checkpointed(forward: Callable[..., Any], context_fn: Callable[[], Any] | None) -> Callable[..., Any]:
    """``forward`` run under non-reentrant checkpointing (selective where ``context_fn`` is given)."""
    options: dict[str, Any] = {"use_reentrant": False}
    if context_fn is not None:
        options["context_fn"] = context_fn

    @functools.wraps(forward)
    def checkpointed_forward(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():  # no backward to run the forward again for (evaluation, generation)
            return forward(*args, **kwargs)
        return checkpoint(forward, *args, **options, **_without_cache(kwargs))

    return checkpointed_forward


def _without_cache(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The block's keyword arguments without a KV cache: the backward runs the block's forward again, which would
    write the cache a second time (and selective checkpointing would refuse the different ops). Training needs no
    cache; transformers' own gradient checkpointing drops it the same way, under these names."""
    dropped: dict[str, Any] = {name: None for name in _CACHE_KEYWORDS if kwargs.get(name) is not None}
    if kwargs.get("use_cache"):
        dropped["use_cache"] = False
    return {**kwargs, **dropped} if dropped else kwargs


@contextlib.contextmanager
def memory_budget(budget: float) -> Iterator[None]:
    """The compiler's activation memory budget for the duration (nothing to do at the default), restored after."""
    if budget == DEFAULT_BUDGET:
        yield
        return
    from torch._functorch import config as functorch_config  # deferred, as compile.py's: a compiled step only

    with functorch_config.patch(activation_memory_budget=budget):
        yield
