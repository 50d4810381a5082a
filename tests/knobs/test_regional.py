"""compile_scope=blocks: the blocks found or named on real modules, compiled in place, trained, timed (CPU)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from trial_workloads import NamedStack

from autotune import knobs
from autotune.errors import InvalidCombination
from autotune.knobs import Knobs
from autotune.knobs.regional import find_blocks, signature
from autotune.measurement import Status
from autotune.trial.eagerprobe import EagerProbe, eager_twin
from autotune.trial.job import run_trial
from autotune.trial.pruning import Pruning
from autotune.trial.trainstep import TrainStep
from autotune.trial.trialspec import TrialSpec
from autotune.workloads import Workload, gpt2, resnet50


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in self.qkv(x).split(dim, dim=2))
        return self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(x.shape))


class Layer(nn.Module):
    """A pre-norm transformer layer: two LayerNorms (identical siblings too, but only two of them)."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    """A GPT-2-like stack that names nothing: embeddings, ``layers`` identical layers, a head."""

    def __init__(self, layers: int = 4, dim: int = 16, vocab: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Layer(dim) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


# --- which blocks ------------------------------------------------------------------------------------


def test_a_gpt2_like_stack_compiles_its_layers() -> None:
    model = Decoder(layers=6)
    blocks = find_blocks(model)
    assert blocks.modules == tuple(model.layers) and blocks.how == "found"
    assert blocks.describe() == "6 x Layer (layers.0 .. layers.5, found)"


def test_the_builtin_gpt2_names_its_transformer_blocks() -> None:
    model = gpt2.GPT(gpt2.GPTConfig(layers=3, heads=2, dim=16, seq=8, vocab=32, batch=2))
    blocks = find_blocks(model)
    assert blocks.modules == tuple(model.blocks) and blocks.how == "named"


def test_a_resnet_compiles_the_largest_set_of_identical_bottlenecks_only() -> None:
    # ResNet-50's depth (3, 4, 6, 3) at a small width: each stage's first bottleneck strides and projects, and the
    # stages differ in width, so the largest identical set is stage 3's last five (stages.8 .. stages.12).
    model = resnet50.ResNet((3, 4, 6, 3), width=4, classes=10)
    blocks = find_blocks(model)
    assert blocks.modules == tuple(model.stages)[8:13] and blocks.names == tuple(f"stages.{i}" for i in range(8, 13))
    assert len({signature(block) for block in model.stages}) == 8  # compiled one by one: 8 graphs, not 1


def test_a_model_without_repeated_blocks_says_so() -> None:
    tiny_resnet = resnet50.ResNet((1, 1, 1, 1), width=8, classes=10)  # one bottleneck a stage, each different
    assert not find_blocks(tiny_resnet)
    assert find_blocks(tiny_resnet).reason == "ResNet has no repeated blocks (no two identical modules of its own)"
    # Identical siblings of torch's own (nn.Sequential's forward is torch's: block.compile() would leave it eager;
    # Linear is one operation) are no blocks either.
    sequential = nn.Sequential(*(nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(4)))
    assert not find_blocks(sequential)


def test_a_model_names_its_blocks_wherever_they_sit() -> None:
    model = NamedStack(8)
    blocks = find_blocks(model)
    assert blocks.how == "named" and blocks.names == ("first", "rest.0", "rest.1")

    class Unnamed(NamedStack):
        _repeated_blocks = ()  # type: ignore[assignment]  # the same model naming nothing: identical siblings only

    assert find_blocks(Unnamed(8)).names == ("rest.0", "rest.1")


def test_a_named_class_the_model_lacks_is_the_reason() -> None:
    model = Decoder(layers=2)
    model._repeated_blocks = ["DecoderLayer"]  # type: ignore[assignment]
    assert not find_blocks(model)
    assert "names DecoderLayer, but the model has none" in find_blocks(model).reason


def test_most_blocks_win_then_the_larger_block() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.small = nn.ModuleList(Layer(8) for _ in range(3))
            self.large = nn.ModuleList(Layer(32) for _ in range(3))
            self.more = nn.ModuleList(Attention(8, 2) for _ in range(4))

    model = Twice()
    assert find_blocks(model).modules == tuple(model.more)
    del model.more
    assert find_blocks(model).modules == tuple(model.large)  # a tie: the larger block


def test_identical_means_same_shapes_and_same_plain_attributes() -> None:
    assert signature(Layer(16)) == signature(Layer(16))
    assert signature(Layer(16)) != signature(Layer(32))  # parameter shapes
    assert signature(Attention(16, 2)) != signature(Attention(16, 4))  # `heads`: Dynamo guards on it


# --- apply() ---------------------------------------------------------------------------------------------


def test_blocks_with_eager_is_an_invalid_combination() -> None:
    with pytest.raises(InvalidCombination, match="compile_scope=blocks needs a compile_mode other than none"):
        knobs.apply(Decoder(), None, Knobs(compile_scope="blocks"), "cpu")


def test_apply_compiles_each_block_with_the_knobs_arguments() -> None:
    compiled: list[tuple[Any, dict[str, Any]]] = []

    def fake_compile(fn: Any, **kwargs: Any) -> Any:
        compiled.append((fn, kwargs))
        return fn

    model = Decoder(layers=3)
    same, ctx = knobs.apply(model, None, Knobs(compile_mode="max-autotune-no-cudagraphs", compile_scope="blocks"),
                            "cpu", compile_fn=fake_compile)  # fmt: skip
    assert same is model and ctx.blocks is not None and len(ctx.blocks) == 3
    assert [fn.__self__ for fn, _ in compiled] == list(model.layers)  # each block's call, not the model
    assert all(kwargs == {"mode": "max-autotune-no-cudagraphs"} for _, kwargs in compiled)


def test_a_model_without_blocks_is_compiled_whole_and_the_scope_is_a_noop() -> None:
    wrapped: list[nn.Module] = []

    def fake_compile(m: nn.Module, **_: Any) -> nn.Module:
        wrapped.append(m)
        return m

    model = resnet50.ResNet((1, 1, 1, 1), width=8, classes=10)
    _, ctx = knobs.apply(model, None, Knobs(compile_mode="default", compile_scope="blocks"), "cpu",
                         compile_fn=fake_compile)  # fmt: skip
    assert wrapped == [model] and "compile_scope" in ctx.noops
    assert ctx.blocks is not None and not ctx.blocks and ctx.blocks.reason


@pytest.mark.slow
def test_blocks_compiled_in_place_train_as_the_eager_model_does() -> None:
    torch.manual_seed(0)
    model = Decoder(layers=3)
    eager = copy.deepcopy(model)
    keys = list(model.state_dict())
    batches = [(torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8)))] * 3  # one batch: the loss must fall

    def train(net: nn.Module, knob: Knobs) -> list[float]:
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
        net, ctx = knobs.apply(net, optimizer, knob, "cpu")
        losses = []
        for idx, targets in batches:
            loss = F.cross_entropy(net(idx).flatten(0, 1), targets.flatten())
            ctx.backward(loss)
            ctx.step()
            ctx.zero_grad()
            losses.append(loss.item())
        return losses

    compiled_losses = train(model, Knobs(compile_mode="default", compile_scope="blocks"))
    assert type(model) is Decoder and list(model.state_dict()) == keys  # the model kept: no _orig_mod. prefix
    assert all(layer._compiled_call_impl is not None for layer in model.layers)
    assert model._compiled_call_impl is None and model.head._compiled_call_impl is None  # the rest stays eager
    eager_losses = train(eager, Knobs())
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-4)
    assert compiled_losses[-1] < compiled_losses[0]  # it learns


def test_the_eager_probe_runs_compiled_blocks_eager_without_compiling() -> None:
    model: nn.Module = Decoder(layers=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model, ctx = knobs.apply(model, optimizer, Knobs(compile_mode="default", compile_scope="blocks"), "cpu")
    batch = (torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8)))
    workload = Workload(model, lambda n, d: batch, lambda logits, y: F.cross_entropy(logits.flatten(0, 1), y.flatten()))
    before = [p.detach().clone() for p in model.parameters()]
    frames = torch._dynamo.utils.counters["frames"]["total"]
    step = TrainStep(workload, model, ctx, optimizer, lambda i: batch)
    assert (eager_twin(step, items=16, device=torch.device("cpu")) or EagerProbe(0)).throughput > 0
    assert torch._dynamo.utils.counters["frames"]["total"] == frames  # nothing was compiled
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_a_trial_records_what_it_compiled() -> None:
    spec = TrialSpec(
        "trial_workloads:named_blocks",
        {"compile_mode": "default", "compile_scope": "blocks"},
        "tiny",
        "cpu",
        pruning=Pruning(below=1e-9, compile_gain=1.5),  # probed eager first, never pruned
    )
    result = run_trial(spec)
    assert result.status is Status.OK, result.reason
    assert result.params["compile_scope"] == "blocks" and result.metrics["compiled_blocks"] == 3
    assert result.metrics["compiled_block"] == "3 x Layer (first .. rest.1, named)"
    assert result.metrics["eager_probe_throughput"] > 0 and "noop_knobs" not in result.metrics


def test_a_trial_on_a_model_without_blocks_says_the_whole_model_was_compiled() -> None:
    spec = TrialSpec("trial_workloads:tiny_mlp", {"compile_mode": "default", "compile_scope": "blocks"}, "tiny", "cpu")
    result = run_trial(spec)
    assert result.status is Status.OK, result.reason
    assert result.metrics["compiled_blocks"] == 0 and result.metrics["noop_knobs"] == "compile_scope"
    assert any("the whole model was compiled" in warning for warning in result.warnings)


def test_an_eager_trial_asking_for_blocks_is_invalid() -> None:
    result = run_trial(TrialSpec("trial_workloads:tiny_mlp", {"compile_scope": "blocks"}, "tiny", "cpu"))
    assert result.status is Status.INVALID and "compile_scope=blocks needs a compile_mode" in (result.reason or "")
