"""Agent processes of the local plane, and the bounded pool they run in.

An ``AgentProcess`` is one CLI subprocess in its own process group (so signals reach the
tools it spawned too; under the sandbox, the group holds bwrap, its init, the forwarders
and the CLI, and the sandbox dies with bwrap): its brief goes to stdin, which is then closed; reader threads keep
its stdout lines (for the stream parser, and in a transcript file) and the tail of its
stderr. Pause and resume are SIGSTOP/SIGCONT; stop is SIGTERM, then SIGKILL after a grace.

The ``ProcessPool`` admits at most ``max_processes`` live processes; the rest wait in
first-in-first-out order of their first request.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from workers.planes.local.forward import Forwarder
from workers.planes.local.launch import Launch

STDERR_TAIL = 40
STDERR_DRAIN_SECONDS = 2.0  # how long an exited process's stderr is still read before it counts as finished


class AgentProcess:
    """A running agent CLI and what it has written so far."""

    def __init__(self, launch: Launch, forwarder: Forwarder | None = None) -> None:
        self.launch = launch
        plan = launch.sandbox
        # A sandboxed process reaches its allowed addresses through the forwarder's sockets,
        # listening before it starts and closed once it has exited.
        self._forwarder = forwarder if plan is not None and plan.sockets is not None else None
        if self._forwarder is not None and plan is not None and plan.sockets is not None:
            self._forwarder.open(plan.sockets, plan.endpoints)
        self.started_at = time.monotonic()
        self.paused = False
        self.stopping = False
        self.exit_code: int | None = None
        self._lines: deque[str] = deque()
        self._errors: deque[str] = deque(maxlen=STDERR_TAIL)
        self._new_errors: list[str] = []
        self._lock = threading.Lock()
        self._eof = threading.Event()
        self._stderr_eof = threading.Event()
        try:
            self.popen = subprocess.Popen(
                launch.argv,
                cwd=launch.cwd,
                env=launch.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError:
            self._close_forwarding()
            raise
        self.pid = self.popen.pid
        for target in (self._write_brief, self._read_stdout, self._read_stderr):
            threading.Thread(target=target, name=f"agent-{self.pid}-{target.__name__}", daemon=True).start()

    # -- pipes --------------------------------------------------------------------------

    def _write_brief(self) -> None:
        stdin = self.popen.stdin
        assert stdin is not None
        try:
            stdin.write(self.launch.stdin.encode())
        except (BrokenPipeError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def _read_stdout(self) -> None:
        stdout = self.popen.stdout
        assert stdout is not None
        self.launch.transcript.parent.mkdir(parents=True, exist_ok=True)
        with self.launch.transcript.open("wb") as transcript:
            for raw in stdout:
                # Taken in before it is written down: a line in the transcript file has been
                # read by the plane (what waits on the file may rely on it).
                with self._lock:
                    self._lines.append(raw.decode("utf-8", errors="replace"))
                transcript.write(raw)
                transcript.flush()
        self.exit_code = self.popen.wait()
        self._close_forwarding()
        # Its last stderr lines may still be in the pipe: "finished" promises they were read
        # (a child left holding stderr open bounds the wait).
        self._stderr_eof.wait(STDERR_DRAIN_SECONDS)
        self._eof.set()

    def _read_stderr(self) -> None:
        stderr = self.popen.stderr
        assert stderr is not None
        try:
            for raw in stderr:
                text = raw.decode("utf-8", errors="replace").rstrip()
                if text:
                    with self._lock:
                        self._errors.append(text)
                        self._new_errors.append(text)
        finally:
            self._stderr_eof.set()

    def _close_forwarding(self) -> None:
        if self._forwarder is not None and self.launch.sandbox is not None:
            self._forwarder.close(self.launch.sandbox.sockets)

    def take_lines(self) -> list[str]:
        """Stdout lines read since the last call."""
        with self._lock:
            lines = list(self._lines)
            self._lines.clear()
        return lines

    def take_errors(self) -> list[str]:
        """Stderr lines read since the last call."""
        with self._lock:
            lines, self._new_errors = self._new_errors, []
        return lines

    def stderr_tail(self) -> str:
        with self._lock:
            return "\n".join(self._errors)

    @property
    def finished(self) -> bool:
        """Exited, and every line it wrote has been read."""
        return self._eof.is_set()

    def wait(self, timeout: float) -> bool:
        return self._eof.wait(timeout)

    # -- signals ------------------------------------------------------------------------

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def pause(self) -> None:
        if not self.paused and not self.finished:
            self._signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.paused:
            self._signal(signal.SIGCONT)
            self.paused = False

    def stop(self, grace: float) -> None:
        """SIGTERM (a stopped process is continued so it can act on it), SIGKILL after ``grace``."""
        if self.stopping or self.finished:
            return
        self.stopping = True
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)
        self.paused = False

        def kill_late() -> None:
            if not self._eof.wait(grace):
                self._signal(signal.SIGKILL)

        threading.Thread(target=kill_late, name=f"agent-{self.pid}-kill", daemon=True).start()


class ProcessPool:
    """At most ``max_processes`` live agent processes; later requests wait, first in first out."""

    def __init__(self, max_processes: int) -> None:
        self.max_processes = max_processes
        self.live: dict[int, AgentProcess] = {}  # by pid: a replaced process counts until it exits
        self.waiting: dict[str, float] = {}  # key -> first request time (dicts keep order)
        self._lock = threading.Lock()

    def admit(self, key: str) -> bool:
        """True when ``key`` may start a process now; otherwise it keeps its place in line."""
        with self._lock:
            self._reap()
            self.waiting.setdefault(key, time.monotonic())
            free = self.max_processes - len(self.live)
            ahead = list(self.waiting).index(key)
            return ahead < free

    def position(self, key: str) -> int:
        """How many requests are ahead of ``key`` (-1 when it is not waiting)."""
        with self._lock:
            keys = list(self.waiting)
            return keys.index(key) if key in keys else -1

    def started(self, key: str, process: AgentProcess) -> None:
        with self._lock:
            self.waiting.pop(key, None)
            self.live[process.pid] = process

    def cancel(self, key: str) -> None:
        """``key`` no longer wants a process (its session ended, or a launch failed)."""
        with self._lock:
            self.waiting.pop(key, None)

    def _reap(self) -> None:
        for pid in [pid for pid, p in self.live.items() if p.finished]:
            del self.live[pid]

    def live_count(self) -> int:
        with self._lock:
            self._reap()
            return len(self.live)


def process_state(pid: int) -> str:
    """The kernel's state letter of ``pid`` (``T`` when stopped), "" when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        return ""
    return ""
