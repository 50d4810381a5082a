"""The compile knobs: ``compile_mode`` (torch.compile's mode, or none for eager), ``compile_scope`` (what is compiled)
and ``inductor`` (Inductor options).

``compile_scope`` says what ``torch.compile`` compiles: the whole model (``model``, the default), or each of its
repeated blocks in place (``blocks``: regional compilation, :mod:`autotune.knobs.regional`; the blocks a model names
in ``_repeated_blocks``, else the largest set of structurally identical children). A model with no repeated blocks is
compiled whole, with ``compile_scope`` recorded as a no-op. ``compile_scope=blocks`` with ``compile_mode=none`` is
an invalid combination: nothing would be compiled, and the trial would only repeat the eager configuration's
(a space makes the scope conditional instead: ``when: {compile_mode: [...]}``).

The ``inductor`` knob holds Inductor options (:mod:`autotune.knobs.inductor`: an allowlist, set by a space's
``finalists:`` stage). They go to ``torch.compile(options=...)`` with the compile mode's own options, so Inductor
patches its config with them while it compiles this model, and only then.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch

from autotune.errors import InvalidCombination
from autotune.knobs import inductor, regional
from autotune.knobs.spec import KnobSpec

__all__ = [
    "COMPILE_MODE",
    "COMPILE_MODES",
    "COMPILE_SCOPE",
    "COMPILE_SCOPES",
    "CUDAGRAPH_MODES",
    "INDUCTOR",
    "Compiled",
    "check",
    "compile_arguments",
    "compile_backward_with_forward",
    "compile_blocks",
    "compile_model",
]

COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILE_SCOPES = ("model", "blocks")
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")  # the compile modes that capture CUDA graphs

COMPILE_MODE = KnobSpec("compile_mode", str, COMPILE_MODES, "torch.compile mode, or none for eager")
COMPILE_SCOPE = KnobSpec(
    "compile_scope", str, COMPILE_SCOPES, "what is compiled: the whole model, or each repeated block in place"
)
INDUCTOR = KnobSpec(
    "inductor",
    str,
    None,
    "Inductor options for torch.compile (a space's finalists set them; None: Inductor's own)",
    nullable=True,
    parse=lambda value: inductor.to_text(inductor.parse(value)),
)


def check(compile_mode: str, compile_scope: str) -> None:
    """Raise :class:`InvalidCombination` for a scope with nothing to compile."""
    if compile_scope == "blocks" and compile_mode == "none":
        raise InvalidCombination(
            "compile_scope=blocks needs a compile_mode other than none: eager compiles no blocks "
            "(in a space: compile_scope: {choices: [model, blocks], when: {compile_mode: [default, ...]}})"
        )


class Compiled(NamedTuple):
    """The model to train; whether its steps run CUDA graphs; with ``compile_scope=blocks`` the blocks compiled one
    by one (empty, with its reason, when the model has none); the compile knobs that were no-ops."""

    model: torch.nn.Module
    cudagraphs: bool
    blocks: regional.Blocks | None
    noops: list[str]


def compile_model(
    model: torch.nn.Module,
    compile_mode: str,
    blocks: regional.Blocks | None,
    options: Mapping[str, bool | str],
    device_type: str,
    compile_fn: Callable[..., Any] = torch.compile,
) -> Compiled:
    """Compile ``model`` as the compile knobs say (eager for ``compile_mode=none``): whole, or with
    ``compile_scope=blocks`` each of its repeated ``blocks`` in place (:func:`autotune.knobs.regional.find_blocks`;
    None: the scope is the model)."""
    noops: list[str] = []
    compiles = compile_mode != "none"
    cudagraphs = compiles and bool(options.get("triton.cudagraphs", compile_mode in CUDAGRAPH_MODES))
    if cudagraphs and device_type != "cuda":
        noops.append("cudagraphs")  # CUDA graphs need a GPU; inductor runs without them here
        cudagraphs = False
    arguments = compile_arguments(compile_mode, options) if compiles else {}
    if compiles:
        compile_backward_with_forward()
    blocks = blocks if compiles else None
    if blocks is not None and not blocks:
        noops.append("compile_scope")  # no repeated blocks: the whole model is compiled, as compile_scope=model
    if blocks:
        compile_blocks(blocks, compile_fn, **arguments)
    elif compiles:
        model = compile_fn(model, **arguments)
    elif options:
        noops.append("inductor")  # eager: no compiler to give the options to
    return Compiled(model, cudagraphs, blocks, noops)


def compile_blocks(blocks: regional.Blocks, compile_fn: Callable[..., Any] = torch.compile, **arguments: Any) -> None:
    """Compile each block in place (``block.compile(**arguments)``): its calls go through the compiled code.

    A ``compile_fn`` other than ``torch.compile`` (a test's fake, a wrapper) compiles what ``nn.Module.compile``
    hands to ``torch.compile``: the block's ``_call_impl``.
    """
    for block in blocks.modules:
        if compile_fn is torch.compile:
            block.compile(**arguments)
        else:
            block._compiled_call_impl = compile_fn(block._call_impl, **arguments)  # what nn.Module.compile does


def compile_backward_with_forward() -> None:
    """Have AOTAutograd compile a training graph's backward with its forward, not at the first backward.

    The compile is the same work, done a moment earlier (a training step runs the backward anyway); what changes
    is that a graph compiled ahead of its trial without running (:mod:`autotune.trial.ahead`) has its backward in
    the cache too, and the setting is part of AOTAutograd's cache key, so the trial and production, which both
    come through here, look up the entries the compile ahead wrote. Process-wide, like the backend flags; a torch
    without the setting keeps its own behaviour.
    """
    from torch._functorch import config as functorch_config

    if hasattr(functorch_config, "force_non_lazy_backward_lowering"):
        functorch_config.force_non_lazy_backward_lowering = True


def compile_arguments(compile_mode: str, options: Mapping[str, bool | str]) -> dict[str, Any]:
    """``torch.compile``'s keyword arguments: the mode, or with Inductor options the mode's options and these
    together (torch.compile takes one or the other; these win).

    torch.compile turns a mode into these very options (``torch._inductor.list_mode_options``) and
    Inductor patches its config with them while it compiles this model: no process-wide setting.
    """
    if not options:
        return {"mode": compile_mode}
    # deferred: Inductor adds ~1.2 s to torch's import; only knobs with Inductor options need it here
    from torch._inductor import list_mode_options

    merged = {**list_mode_options(compile_mode), **options}
    return {"options": {**merged, **inductor.cache_workarounds(merged)}}
