"""The knob registry: every knob's :class:`~autotune.knobs.spec.KnobSpec`, in one table, and :class:`Knobs`, a full
setting of them.

The space reader and its validation, the trial job, ``autotune export`` and the docs reference
(``scripts/docs_reference.py``) read :data:`KNOB_SPECS`; :func:`autotune.knobs.apply` takes a :class:`Knobs`. A knob
is known everywhere once it has its entry here. The table's order is the knobs' order in messages, in the reference
and in a tuned file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from autotune.errors import AutotuneError
from autotune.knobs import backends, checkpointing, compile, inductor, precision
from autotune.knobs import data_parallel as parallelism  # not `data_parallel`: a field of Knobs has that name
from autotune.knobs import float8 as float8_training  # not `float8`: a field of Knobs has that name
from autotune.knobs.attention import ATTENTION_BACKEND
from autotune.knobs.batch import BATCH_SIZE
from autotune.knobs.data_path import DATA_SPECS
from autotune.knobs.memory_format import MEMORY_FORMAT
from autotune.knobs.optimizer import FUSED_OPTIMIZER
from autotune.knobs.spec import KnobSpec, check_minimum, coerce

__all__ = ["KNOB_SPECS", "Knobs"]

KNOB_SPECS: dict[str, KnobSpec] = {
    spec.name: spec
    for spec in (
        BATCH_SIZE,
        precision.PRECISION,
        float8_training.FLOAT8,
        float8_training.FLOAT8_FILTER,
        MEMORY_FORMAT,
        compile.COMPILE_MODE,
        compile.COMPILE_SCOPE,
        checkpointing.ACTIVATION_CHECKPOINTING,
        checkpointing.ACTIVATION_MEMORY_BUDGET,
        ATTENTION_BACKEND,
        backends.CUDNN_BENCHMARK,
        backends.CUDNN_DETERMINISTIC,
        FUSED_OPTIMIZER,
        backends.MATMUL_PRECISION,
        *DATA_SPECS,
        compile.INDUCTOR,
        *parallelism.DATA_PARALLEL_SPECS,
    )
}


@dataclass(frozen=True)
class Knobs:
    """A full knob setting, a field for each entry of :data:`KNOB_SPECS` with its default.

    ``None`` for a cuDNN flag means PyTorch's own default, untouched.
    """

    batch_size: int | None = None
    precision: str = "default"
    float8: str = "none"
    float8_filter: str | None = None  # which layers float8 converts, in its text form (autotune.knobs.float8)
    memory_format: str = "contiguous"
    compile_mode: str = "none"
    compile_scope: str = "model"
    activation_checkpointing: str = "none"
    activation_memory_budget: float = checkpointing.DEFAULT_BUDGET
    attention_backend: str = "auto"
    cudnn_benchmark: bool | None = None
    cudnn_deterministic: bool | None = None
    fused_optimizer: bool = False
    matmul_precision: str = "auto"
    num_workers: int = 0
    pin_memory: bool = False
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    non_blocking: bool = False
    gpu_prefetch: bool = False
    inductor: str | None = None  # Inductor options in their text form (autotune.knobs.inductor.to_text)
    data_parallel: str = "none"
    ddp_bucket_cap_mb: int = parallelism.DEFAULT_BUCKET_CAP_MB
    ddp_gradient_as_bucket_view: bool = False
    ddp_static_graph: bool = False
    fsdp_reshard_after_forward: bool = True

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Knobs:
        """Knobs from a ``{name: value}`` mapping (strings allowed); unknown names are errors."""
        values: dict[str, Any] = {}
        for name, raw in params.items():
            spec = KNOB_SPECS.get(name)
            if spec is None:
                raise AutotuneError(f"unknown knob {name!r}; knobs are: {', '.join(KNOB_SPECS)}")
            values[name] = coerce(spec, raw)
            check_minimum(spec, values[name])
        return cls(**values)

    def to_params(self) -> dict[str, Any]:
        """All knobs as a plain dict (the ``params`` of a TrialResult and of a tuned config)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def inductor_options(self) -> dict[str, bool | str]:
        """The Inductor options, typed (``{}`` for none)."""
        return inductor.parse(self.inductor) if self.inductor else {}

    @property
    def float8_layers(self) -> float8_training.LayerFilter:
        """Which Linear layers ``float8`` converts (the empty filter: the default rule)."""
        layers = float8_training.LayerFilter
        return layers.read(self.float8_filter) if self.float8_filter else layers()

    @property
    def ddp(self) -> parallelism.DdpSettings:
        """The DDP knobs together, as the wrapper takes them."""
        return parallelism.DdpSettings(self.ddp_bucket_cap_mb, self.ddp_gradient_as_bucket_view, self.ddp_static_graph)

    def check_combination(self, device_type: str, processes: int | None = None) -> None:
        """Raise :class:`~autotune.errors.InvalidCombination` when legal values cannot run together; ``processes``:
        how many the job trains with (None: torch.distributed's world size here, 1 where it is not initialised)."""
        compile.check(self.compile_mode, self.compile_scope)
        checkpointing.check(self.activation_memory_budget, self.compile_mode)
        backends.check(self.cudnn_benchmark, self.cudnn_deterministic, self.precision, self.matmul_precision)
        precision.check(self.precision, device_type)
        float8_training.check(self.float8, self.precision, device_type)
        processes = parallelism.world_size() if processes is None else processes
        parallelism.check(self.data_parallel, self.ddp, self.fsdp_reshard_after_forward, processes)
