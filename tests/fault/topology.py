"""The production topology as real processes: 2 API processes (``serve --workers none``),
2 projectors, 2 tickers, 2 fan-outs and the watcher, on the test's own PostgreSQL and NATS.

A supervisor thread plays the process manager of a deployment: a process that exits
without being told to is recorded (with its log's tail) and started again, a bounded
number of times.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests import infra
from tests.fault.servers import Servers
from tests.processes import ServiceProcess

# kind -> how many copies; "api" is ``squadops serve --workers none``, the rest workers.
COPIES = {"api": 2, "projector": 2, "ticker": 2, "fanout": 2, "watcher": 1}
KINDS = tuple(COPIES)
WRITERS = ("ticker", "watcher")  # the workers that append events on their own
MAX_SUPERVISED_RESTARTS = 5
STARTUP_ATTEMPTS = 3


@dataclass
class Exit:
    """A process that ended without being told to."""

    name: str
    code: int | None
    at: float
    log_tail: str


@dataclass
class Timeline:
    """What happened when (seconds since the start), printed with the counts."""

    started: float = field(default_factory=time.monotonic)
    entries: list[tuple[float, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, what: str) -> None:
        with self.lock:
            self.entries.append((time.monotonic() - self.started, what))

    def lines(self) -> list[str]:
        with self.lock:
            return [f"  {at:7.1f}s  {what}" for at, what in self.entries]


class Topology:
    def __init__(self, servers: Servers, *, tick_seconds: float, timeline: Timeline, lifetime: float = 3600.0) -> None:
        self.servers = servers
        self.timeline = timeline
        self.deadline = time.monotonic() + lifetime  # the supervisor gives up by then at the latest
        self.logs = servers.root / "logs"
        self.logs.mkdir(exist_ok=True)
        self.env = {
            "SQUADOPS_DATABASE_URL": servers.database_url,
            "SQUADOPS_NATS_URL": servers.nats.url,
            "SQUADOPS_ENV": "production",
            "SQUADOPS_LOG_FORMAT": "json",
            "SQUADOPS_LOG_LEVEL": "warning",
            "SQUADOPS_TICK_SECONDS": str(tick_seconds),
            "SQUADOPS_WATCH_INTERVAL_SECONDS": "2",
            "SQUADOPS_CONTROLLER_TIMEOUT_SECONDS": "1",
            "SQUADOPS_LIVE_HEARTBEAT_SECONDS": "1",
            "PYTHONFAULTHANDLER": "1",  # a crash in C code leaves its Python traceback in the log
        }
        self.processes: dict[str, list[ServiceProcess]] = {kind: [] for kind in KINDS}
        for kind, copies in COPIES.items():
            for n in range(1, copies + 1):
                self.processes[kind].append(self._process(kind, f"{kind}-{n}"))
        self.exits: list[Exit] = []
        self.cpu_seconds: Counter[str] = Counter()  # per process name, over all its lives
        self._held: set[str] = set()  # down on purpose: the supervisor leaves them alone
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._gates = {p.name: threading.Lock() for p in self.all()}  # one actor per process at a time
        self._supervisor: threading.Thread | None = None

    def _process(self, kind: str, name: str) -> ServiceProcess:
        from tests.processes import service_env
        from workers.settings import Settings

        base = service_env(Settings(database_url=self.servers.database_url, nats_url=self.servers.nats.url))
        env = {**base, **self.env}
        log = self.logs / f"{name}.log"
        if kind == "api":
            return ServiceProcess.serve(name, env, infra.free_port(), workers="none", log_path=log)
        return ServiceProcess.worker(name, env, kind, log_path=log)

    # -- the whole topology -----------------------------------------------------------------

    @property
    def api_urls(self) -> list[str]:
        return [p.url for p in self.processes["api"]]

    def all(self) -> Iterator[ServiceProcess]:
        for group in self.processes.values():
            yield from group

    def start(self, ready_timeout: float = 90.0) -> None:
        """The schema is created first (as a deployment's first process would), then every
        process starts side by side."""
        from workers.bootstrap import build
        from workers.settings import Settings

        build(Settings(database_url=self.servers.database_url, nats_url=self.servers.nats.url, log_level="warning")).close()
        rest = list(self.all())
        errors: list[BaseException] = []

        def start(process: ServiceProcess) -> None:
            # As a process manager would: a failed start (processes starting side by side
            # race on the schema) is recorded and tried again, a bounded number of times.
            for attempt in range(1, STARTUP_ATTEMPTS + 1):
                try:
                    process.start(ready_timeout=ready_timeout)
                    return
                except Exception as exc:
                    self.exits.append(Exit(process.name, process.exit_code(), time.monotonic(), process.log_tail()))
                    self.timeline.note(f"{process.name} failed to start (attempt {attempt}): {exc!r:.150}")
                    if attempt == STARTUP_ATTEMPTS:
                        errors.append(exc)  # raised below, once every thread ended

        threads = [threading.Thread(target=start, args=(p,), name=f"start-{p.name}") for p in rest]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(ready_timeout + 30)
        if errors:
            raise errors[0]
        self.timeline.note(f"topology up: {', '.join(p.name for p in self.all())}")
        self._supervisor = threading.Thread(target=self._supervise, name="supervisor", daemon=True)
        self._supervisor.start()

    def close(self) -> None:
        """Stops every process (SIGTERM, then kill -9); the supervisor first."""
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(10)
        # A gate held means a start under way (the supervisor's): wait for it, then stop it too.
        gates = [(self._gates[p.name], self._gates[p.name].acquire(timeout=120)) for p in self.all()]
        try:
            for process in self.all():
                self._account(process)
                process.terminate()
            for process in self.all():
                process.close()
        finally:
            for gate, got in gates:
                if got:
                    gate.release()

    def _account(self, process: ServiceProcess) -> None:
        """Adds the CPU time the process used so far (before it is stopped or killed)."""
        if not process.alive() or process.pid is None:
            return
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(process.pid).cpu_times()
            self.cpu_seconds[process.name] += times.user + times.system

    # -- faults ------------------------------------------------------------------------------

    @contextmanager
    def held(self, *names: str) -> Iterator[None]:
        """The named processes are down on purpose while inside."""
        with self._lock:
            self._held.update(names)
        try:
            yield
        finally:
            with self._lock:
                self._held.difference_update(names)

    def kill_and_restart(self, kind: str, index: int, down_seconds: float, wait: Callable[[float], bool]) -> None:
        """kill -9 of one process of ``kind``, down for ``down_seconds``, then started again."""
        process = self.processes[kind][index % len(self.processes[kind])]
        with self._gates[process.name], self.held(process.name):
            pid = process.pid
            self._account(process)
            process.kill()
            self.timeline.note(f"kill -9 {process.name} (pid {pid})")
            wait(down_seconds)
            process.start(ready_timeout=90)
            self.timeline.note(f"restarted {process.name} (pid {process.pid})")

    def stop_kinds(self, kinds: tuple[str, ...]) -> dict[str, int | None]:
        """SIGTERM to every process of ``kinds`` at once (held down); answers their exit codes."""
        chosen = [p for kind in kinds for p in self.processes[kind]]
        gates = [(self._gates[p.name], self._gates[p.name].acquire(timeout=120)) for p in chosen]
        try:
            with self._lock:
                self._held.update(p.name for p in chosen)
            for process in chosen:
                self._account(process)
                process.terminate()
            codes = {p.name: p.stop() for p in chosen}
        finally:
            for gate, got in gates:
                if got:
                    gate.release()
        self.timeline.note(f"stopped {', '.join(f'{n} (exit {c})' for n, c in codes.items())}")
        return codes

    def wait_apis_healthy(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p.ready() for p in self.processes["api"]):
                return True
            time.sleep(0.5)  # the poll interval of this bounded wait
        return False

    # -- supervision -------------------------------------------------------------------------

    def _supervise(self) -> None:
        restarts: dict[str, int] = {}
        retry_at: dict[str, float] = {}
        down: set[str] = set()
        while not self._stop.wait(0.5) and time.monotonic() < self.deadline:
            for process in list(self.all()):
                name = process.name
                gate = self._gates[name]
                if not gate.acquire(blocking=False):
                    continue  # the fault driver is at it
                try:
                    with self._lock:
                        if name in self._held or self._stop.is_set() or process.alive():
                            continue
                    if name not in down:
                        down.add(name)
                        code = process.exit_code()
                        self.exits.append(Exit(name, code, time.monotonic(), process.log_tail()))
                        self.timeline.note(f"{name} exited by itself (code {code})")
                    if restarts.get(name, 0) >= MAX_SUPERVISED_RESTARTS or time.monotonic() < retry_at.get(name, 0):
                        continue
                    restarts[name] = restarts.get(name, 0) + 1
                    retry_at[name] = time.monotonic() + 3
                    try:
                        process.start(ready_timeout=90)
                        down.discard(name)
                        self.timeline.note(f"supervisor restarted {name} (pid {process.pid})")
                    except Exception as exc:
                        self.timeline.note(f"supervisor could not restart {name}: {exc!r:.200}")
                except Exception as exc:  # the supervisor itself must not die
                    self.timeline.note(f"supervisor error on {name}: {exc!r:.200}")
                finally:
                    gate.release()

    def log_tails(self, chars: int = 1500) -> dict[str, str]:
        return {p.name: p.log_tail(chars) for p in self.all()}

    def logs_dir(self) -> Path:
        return self.logs
