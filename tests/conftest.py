"""Shared fixtures: a real MLflow tracking server started with the project's own script."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

# CPU tests check behaviour, not speed. One OpenMP thread per process keeps the many trial processes
# of a test from spin-waiting on each other's threads when the 2 cores are shared (seen: a 12 ms step
# of a tiny ResNet took 2.3 s with another busy process). Trial processes inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The suite's install skips compiling bytecode (README: `pip install --no-compile`), and its hundreds of Python
# processes would each parse torch's sources again where PYTHONDONTWRITEBYTECODE is set (as on CI): they write it,
# so the first process to import a module compiles it for the others.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parents[1]
START_SCRIPT = REPO / "mlflow" / "start-server.sh"
# A cold start (two interpreters importing mlflow, creating the sqlite schema) takes 6-15 s on
# 2 CPU cores; the bound only turns a broken start into a clear failure instead of a hang.
START_TIMEOUT_S = 90.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that hold a slow test run first, each kept whole (its module fixtures set up once): the workers
    then end on quick tests together, not one on a long and mostly sleeping test while the others wait for it."""
    slow_modules = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_modules)  # stable: collection order within each group


class MlflowServer:
    """``mlflow/start-server.sh`` on a free port of 127.0.0.1, with its store in ``store_dir``.

    ``stop()`` and ``start()`` keep the port and the store, so a test can simulate a restarted
    tracking server.
    """

    def __init__(self, store_dir: Path, port: int):
        self.store_dir = store_dir
        self.port = port
        self.uri = f"http://127.0.0.1:{port}"
        self.log_path = store_dir / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            # The mlflow CLI of the interpreter running the tests, even without an activated venv.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "AUTOTUNE_MLFLOW_DIR": str(self.store_dir),
            "AUTOTUNE_MLFLOW_HOST": "127.0.0.1",
            "AUTOTUNE_MLFLOW_PORT": str(self.port),
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        }
        with self.log_path.open("ab") as log:
            # A new session: stop() signals the whole group (the mlflow CLI and its uvicorn child).
            self._process = subprocess.Popen(
                ["bash", str(START_SCRIPT), "--workers", "1"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self._wait_until_healthy()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        self._wait_until_port_closed()

    def restart(self) -> None:
        self.stop()
        self.start()

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """The server is down inside the block and up again after it, even if the block fails."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return "(no server log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._healthy():
                return
            if self._process is not None and self._process.poll() is not None:
                pytest.fail(
                    f"mlflow server exited with code {self._process.returncode} before answering;"
                    f" log tail:\n{self.log_tail()}"
                )
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"mlflow server did not answer on {self.uri} within {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    def _wait_until_port_closed(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """A real MLflow tracking server, one for the whole pytest run (a session fixture); ``.uri`` is its http URI."""
    server = MlflowServer(tmp_path_factory.mktemp("mlflow-server"), _free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()
