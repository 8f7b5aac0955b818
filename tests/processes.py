"""``squadops`` commands in subprocesses: start, wait until ready, kill -9, stop, restart.

Shared by the tests and the benchmarks (``served_process`` in ``tests/live_helpers.py``)
and by the production-topology fault test (``tests/fault``). Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import httpx

from workers.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def service_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment a ``squadops`` process needs to use ``settings``' stores."""
    return {
        **os.environ,
        "SQUADOPS_DATABASE_URL": settings.database_url,
        "SQUADOPS_NATS_URL": settings.nats_url,
        "SQUADOPS_LIVE_STREAM_NAME": settings.live_stream_name,
        "SQUADOPS_LIVE_SUBJECT_PREFIX": settings.live_subject_prefix,
        "SQUADOPS_LOG_LEVEL": "warning",
        # The test's own data dir (worktrees, secrets the embedded default keeps), never ./var.
        "SQUADOPS_DATA_DIR": settings.data_dir,
        # The workspace controller's own port: any free one (8001, the default, may be taken
        # by another test process or by `make run`).
        "SQUADOPS_CONTROLLER_PORT": "0",
        **extra,
    }


class ServiceProcess:
    """One ``squadops`` process (``serve`` when ``port`` is given, else a worker).

    Ready means ``/healthz`` answers 200 for ``serve``, and the worker's "running" line
    in its log for a worker. ``start`` may be called again after ``kill`` or ``stop``:
    a served process comes back on the same port.
    """

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        env: Mapping[str, str],
        *,
        port: int | None = None,
        log_path: Path | None = None,
        root: Path = ROOT,
    ) -> None:
        self.name = name
        self.root = root  # the code it runs: this checkout, or another one (PYTHONPATH in env)
        self.args = list(args)
        self.env = dict(env)
        self.port = port
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._log: IO[bytes] | None = None
        self._log_offset = 0

    @classmethod
    def serve(
        cls, name: str, env: Mapping[str, str], port: int, *, workers: str = "none", log_path: Path | None = None, root: Path = ROOT
    ) -> ServiceProcess:
        args = ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", workers]
        return cls(name, args, env, port=port, log_path=log_path, root=root)

    @classmethod
    def worker(
        cls, name: str, env: Mapping[str, str], worker: str, *, log_path: Path | None = None, root: Path = ROOT
    ) -> ServiceProcess:
        return cls(name, ["worker", worker], env, log_path=log_path, root=root)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, *, ready_timeout: float = 60.0) -> ServiceProcess:
        if self.alive():
            raise RuntimeError(f"{self.name} is already running")
        self._close_log()
        if self.log_path is not None:
            self._log = self.log_path.open("ab")
            self._log_offset = self._log.tell()
            output: int | IO[bytes] = self._log
        else:
            output = subprocess.DEVNULL
        self.process = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", *self.args],
            env=self.env,
            cwd=str(self.root),
            stdout=output,
            stderr=output if self._log is not None else None,
        )
        self.starts += 1
        try:
            self.wait_ready(ready_timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.ready():
                return
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited while starting (code {self.exit_code()}): {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready within {timeout:.0f}s: {self.log_tail()}")
            time.sleep(0.1)  # the poll interval of this bounded wait

    def ready(self) -> bool:
        if self.port is not None:
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
            return False
        if self.log_path is None:
            return self.alive()
        return b"running (" in self._new_output()

    def kill(self) -> None:
        """kill -9, then reaped (bounded)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)

    def terminate(self) -> None:
        """SIGTERM, not waited for (``stop`` waits)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then kill -9 after ``timeout``; answers the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.poll()

    def close(self) -> None:
        self.stop()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- output ---------------------------------------------------------------------------

    def _new_output(self) -> bytes:
        if self.log_path is None or not self.log_path.exists():
            return b""
        with self.log_path.open("rb") as f:
            f.seek(self._log_offset)
            return f.read(1_000_000)

    def log_tail(self, chars: int = 2000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        with self.log_path.open("rb") as f:
            f.seek(max(0, self.log_path.stat().st_size - chars))
            return f.read().decode(errors="replace")
