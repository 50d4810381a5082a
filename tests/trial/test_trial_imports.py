"""The trial process knows nothing of Optuna, MLflow or the sweep: a trial job stays testable alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import autotune.trial

TRIAL = Path(autotune.trial.__file__).parent
FORBIDDEN = ("optuna", "mlflow", "autotune.sweep", "autotune.tracking", "autotune.views", "autotune.records")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_module_of_the_trial_package_imports_optuna_mlflow_or_the_sweep() -> None:
    for path in sorted(TRIAL.glob("*.py")):
        bad = {name for name in _imports(path) if name.startswith(FORBIDDEN)}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_running_a_trial_job_loads_none_of_them() -> None:
    """Transitively too: what the trial process imports to run a job (the profiler included)."""
    probe = (
        "import sys; import autotune.trial.job, autotune.profiling.capture; "
        f"print(sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r})))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", loaded
