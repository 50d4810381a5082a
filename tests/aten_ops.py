"""A test helper: the names of the aten ops a piece of code runs (which SDPA kernel ran, for one)."""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode


class AtenOps(TorchDispatchMode):
    """The names of the aten ops run under it, in ``names``."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.names.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))
