"""The activation checkpointing knobs: less kept for the backward, the same gradients, a transformers model's layers,
the compiler's memory budget around the step only, and a model without blocks an invalid trial."""

from __future__ import annotations

import weakref
from typing import Any

import pytest
import torch
from torch._functorch import config as functorch_config
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from trial_workloads import AttentionStack, attention_batch

from autotune.errors import AutotuneError, InvalidCombination
from autotune.knobs.applying import apply
from autotune.knobs.checkpointing import checkpoint_blocks
from autotune.knobs.regional import find_blocks
from autotune.knobs.registry import Knobs
from autotune.measurement import Status
from autotune.space import load_space
from autotune.trial.job import run_trial
from autotune.trial.trialspec import TrialSpec


class _KeptBytes(TorchDispatchMode):
    """Weak references to the storage of every op's output: after the forward, those still alive are what the
    backward keeps (saved by autograd or by selective checkpointing's cache), plus the output itself."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[tuple[weakref.ref[torch.UntypedStorage], int, int]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for tensor in torch.utils._pytree.tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                self.outputs.append((weakref.ref(storage), storage.data_ptr(), storage.nbytes()))
        return out

    def alive(self, besides: set[int]) -> int:
        """Bytes of the outputs' storages still alive, each once, those at ``besides`` (the weights) left out."""
        kept = {ptr: size for ref, ptr, size in self.outputs if ref() is not None and ptr not in besides}
        return sum(kept.values())


def _kept_for_backward(model: torch.nn.Module, knobs: Knobs) -> int:
    """Bytes the forward of one batch leaves alive for the backward, under ``knobs``."""
    model, ctx = apply(model, None, knobs, "cpu")
    inputs, targets = attention_batch(16, torch.device("cpu"))
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    tracker = _KeptBytes()
    with ctx.autocast(), tracker:
        loss = F.cross_entropy(model(inputs), targets)
    kept = tracker.alive(weights)
    ctx.backward(loss)
    return kept


def _gradients(knobs: Knobs) -> list[torch.Tensor]:
    torch.manual_seed(0)
    inputs, targets = attention_batch(8, torch.device("cpu"))
    model, ctx = apply(AttentionStack(), None, knobs, "cpu")
    with ctx.autocast():
        loss = F.cross_entropy(model(inputs), targets)
    ctx.backward(loss)
    return [p.grad for p in model.parameters() if p.grad is not None]


def test_checkpointing_keeps_less_for_the_backward_full_least() -> None:
    kept = {}
    for mode in ("none", "full", "selective"):
        torch.manual_seed(0)
        kept[mode] = _kept_for_backward(AttentionStack(), Knobs(activation_checkpointing=mode))
    assert kept["full"] < kept["selective"] < kept["none"], kept


@pytest.mark.parametrize("mode", ["full", "selective"])
def test_checkpointing_leaves_the_gradients_as_they_were(mode: str) -> None:
    expected = _gradients(Knobs())
    got = _gradients(Knobs(activation_checkpointing=mode))
    assert len(got) == len(expected) == len(list(AttentionStack().parameters()))
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(expected, got, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize(
    "setting",
    [
        {"compile_mode": "default", "activation_checkpointing": "selective"},
        {"compile_mode": "default", "compile_scope": "blocks", "activation_checkpointing": "full"},
        {"precision": "bf16", "activation_checkpointing": "selective"},
        {"compile_mode": "default", "activation_checkpointing": "full", "activation_memory_budget": 0.5},
    ],
)
def test_checkpointing_composes_with_compile_and_precision(setting: dict[str, Any]) -> None:
    plain = {k: v for k, v in setting.items() if k not in ("activation_checkpointing", "activation_memory_budget")}
    torch._dynamo.reset()
    expected = _gradients(Knobs.from_params(plain))
    torch._dynamo.reset()
    got = _gradients(Knobs.from_params(setting))
    tolerance = 2e-2 if setting.get("precision") == "bf16" else 1e-4
    assert all(torch.allclose(a, b, rtol=tolerance, atol=tolerance * 1e-2) for a, b in zip(expected, got, strict=True))


def test_a_transformers_model_is_checkpointed_over_its_decoder_layers() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    keys = list(model.state_dict())
    tokens = torch.randint(0, 64, (2, 12))

    def loss_and_grads(knobs: Knobs) -> tuple[float, list[torch.Tensor]]:
        model.zero_grad(set_to_none=True)
        trained, ctx = apply(model, None, knobs, "cpu")
        with ctx.autocast():
            loss = trained(input_ids=tokens, labels=tokens).loss
        ctx.backward(loss)
        return float(loss.detach()), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    loss, grads = loss_and_grads(Knobs())
    checkpointed_loss, checkpointed_grads = loss_and_grads(Knobs(activation_checkpointing="selective"))
    blocks = checkpoint_blocks(find_blocks(model), "full")  # what apply() wrapped, wrapped again: the original, once
    assert blocks is not None
    assert blocks.describe() == "3 x LlamaDecoderLayer (model.layers.0 .. model.layers.2, named)"
    layer = model.model.layers[0]
    assert layer.forward.__wrapped__.__func__ is type(layer).forward  # not the wrapper apply() left
    assert list(model.state_dict()) == keys and type(layer).__name__ == "LlamaDecoderLayer"
    assert checkpointed_loss == pytest.approx(loss, rel=1e-5)
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(grads, checkpointed_grads, strict=True))


def test_the_memory_budget_is_set_for_the_step_only() -> None:
    _, ctx = apply(AttentionStack(), None, Knobs(compile_mode="default", activation_memory_budget=0.3), "cpu")
    before = functorch_config.activation_memory_budget
    with ctx.autocast():
        assert functorch_config.activation_memory_budget == 0.3
    assert functorch_config.activation_memory_budget == before == 1.0


def test_a_memory_budget_without_compile_is_an_invalid_combination() -> None:
    with pytest.raises(InvalidCombination, match=r"activation_memory_budget=0\.5 needs a compile_mode"):
        Knobs(activation_memory_budget=0.5).check_combination("cpu")
    with pytest.raises(
        AutotuneError, match=r"activation_memory_budget=1\.5 is not valid: expected a number in \[0, 1\]"
    ):
        Knobs.from_params({"activation_memory_budget": "1.5"})


def test_validation_rejects_a_memory_budget_that_can_run_eager_in_one_line(tmp_path: Any) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(
        "workload: {name: gpt2, preset: tiny}\n"
        "params:\n"
        "  compile_mode: [none, default]\n"
        "  activation_memory_budget: [1.0, 0.5]\n"
    )
    with pytest.raises(AutotuneError) as raised:
        load_space(space)
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    expected = "params.activation_memory_budget: a budget of 0.5 with compile_mode none is an invalid combination"
    assert expected in message
    space.write_text(space.read_text().replace("[1.0, 0.5]", "{choices: [1.0, 0.5], when: {compile_mode: [default]}}"))
    assert load_space(space).params["activation_memory_budget"].choices == (1.0, 0.5)


def test_a_model_without_repeated_blocks_is_an_invalid_trial() -> None:
    result = run_trial(TrialSpec("trial_workloads:tiny_mlp", {"activation_checkpointing": "full"}, "tiny", "cpu"))
    assert result.status is Status.INVALID
    assert result.reason is not None and len(result.reason.splitlines()) == 1
    assert result.reason.startswith("activation_checkpointing=full needs repeated blocks: Sequential has no repeated")


def test_a_checkpointed_trial_runs() -> None:
    spec = TrialSpec("trial_workloads:tiny_attention", {"activation_checkpointing": "selective"}, "tiny", "cpu")
    result = run_trial(spec)
    assert result.status is Status.OK, result.reason
    assert result.params["activation_checkpointing"] == "selective" and result.metrics["throughput"] > 0
