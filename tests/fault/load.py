"""The soak's clients: launches, readers and control verbs against both API processes.

Every answer goes through one ``Recorder``: status counts per endpoint and fault phase,
every 5xx other than 503 with its body, every 201/202 command with the id it answered
(checked against the event log at the end), connection errors (an API process being
killed) counted apart. All traffic goes to 127.0.0.1; every loop is bounded in count
and time.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.conftest import ADMIN
from tests.helpers import DEMO_LIKE

STUDIO = "/v1/admin/studio"
PLANE = "/control-plane/studio"
TERMINAL = ("completed", "cleaned_up")
SLOW_SECONDS = 2.0  # C19: an unreachable database is answered 503 within 2 s
SESSION_VERBS: tuple[dict[str, str], ...] = (
    {"verb": "comment_agent", "message": "soak: status please"},
    {"verb": "nudge_agent"},
    {"verb": "create_task_card", "title": "soak follow-up"},
    {"verb": "queue_request", "message": "soak: when you are free"},
)
RUN_VERBS: tuple[dict[str, str], ...] = ({"verb": "verify_wave"}, {"verb": "replay_blockers"})


@dataclass(frozen=True)
class Command:
    """A command answered 201/202: its kind and the id it answered."""

    kind: str  # project | launch | execute | control
    key: str
    label: str
    api: str


@dataclass(frozen=True)
class ServerError:
    at: float
    phase: str
    label: str
    url: str
    status: int
    body: str


@dataclass
class Recorder:
    phase: str = "warmup"
    started: float = field(default_factory=time.monotonic)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    by_phase: Counter[tuple[str, int]] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)
    unavailable_codes: Counter[str] = field(default_factory=Counter)
    server_errors: list[ServerError] = field(default_factory=list)
    false_not_found: Counter[str] = field(default_factory=Counter)
    commands: list[Command] = field(default_factory=list)
    slowest: dict[str, float] = field(default_factory=dict)  # phase -> slowest answer (seconds)
    slow: Counter[str] = field(default_factory=Counter)  # phase -> answers slower than SLOW_SECONDS
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set_phase(self, phase: str) -> None:
        self.phase = phase

    def call(
        self, http: httpx.Client, method: str, path: str, label: str, *, known: bool = False, **kw: Any
    ) -> httpx.Response | None:
        """One request; ``known``: the resource exists (a 404 is a false one)."""
        phase = self.phase
        sent = time.monotonic()
        try:
            response = http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            with self.lock:
                self.transport_errors[f"{label}: {type(exc).__name__}"] += 1
            return None
        self.answered(label, phase, response, str(http.base_url), known=known, seconds=time.monotonic() - sent)
        return response

    def answered(
        self, label: str, phase: str, response: httpx.Response, api: str, *, known: bool = False, seconds: float = 0.0
    ) -> None:
        status = response.status_code
        with self.lock:
            self.slowest[phase] = max(self.slowest.get(phase, 0.0), seconds)
            if seconds > SLOW_SECONDS:
                self.slow[phase] += 1
            self.statuses[(label, status)] += 1
            self.by_phase[(phase, status)] += 1
            if status == 503:
                self.unavailable_codes[_code(response)] += 1
            elif status >= 500:
                self.server_errors.append(
                    ServerError(time.monotonic() - self.started, phase, label, str(response.request.url), status,
                                response.text[:400])
                )
            elif status == 404 and known:
                self.false_not_found[f"{label} ({phase}): {_code(response)}"] += 1
        if status in (201, 202):
            self._command(label, response, api)

    def _command(self, label: str, response: httpx.Response, api: str) -> None:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if label == "POST project":
            command = Command("project", str(body.get("project_slug", "")), label, api)
        elif label in ("POST launch", "POST replay"):
            command = Command("launch", str(body.get("run_id", "")), label, api)
        elif label == "POST execute":
            command = Command("execute", f"{body.get('run_id', '')}@{body.get('requested_at', '')}", label, api)
        elif label.startswith("POST control"):
            command = Command("control", str(body.get("control_id", "")), label, api)
        else:
            command = Command("other", response.text[:100], label, api)
        with self.lock:
            self.commands.append(command)

    def count(self, status: int) -> int:
        with self.lock:
            return sum(n for (_, s), n in self.statuses.items() if s == status)

    def total(self) -> int:
        with self.lock:
            return sum(self.statuses.values())


def _code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return "(not json)"
    return str(body.get("code", "")) if isinstance(body, dict) else "(not an object)"


class Runs:
    """The runs the clients know: id -> last status seen (thread-safe)."""

    def __init__(self) -> None:
        self._status: dict[str, str] = {}
        self._lock = threading.Lock()

    def add(self, run_id: str, status: str = "scheduled") -> None:
        with self._lock:
            self._status[run_id] = status

    def seen(self, run_id: str, status: str) -> None:
        with self._lock:
            if run_id in self._status:
                self._status[run_id] = status

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._status)

    def active(self) -> list[str]:
        with self._lock:
            return [r for r, s in self._status.items() if s not in TERMINAL]

    def pick(self, rng: random.Random, active: bool = True) -> str | None:
        choices = self.active() if active else self.ids()
        return rng.choice(choices) if choices else None


class Load:
    """The client threads: started together, stopped together (bounded joins)."""

    def __init__(
        self, api_urls: list[str], recorder: Recorder, *, runs: int, max_runs: int, lifetime: float = 3600.0, seed: int = 8
    ) -> None:
        self.api_urls = api_urls
        self.recorder = recorder
        self.target_runs = runs
        self.max_runs = max_runs
        self.runs = Runs()
        self.slug = ""
        self.seed = seed
        self.stop = threading.Event()
        self.deadline = time.monotonic() + lifetime  # every client loop ends by then at the latest
        self.launched = 0
        self.replays = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def client(self, index: int) -> httpx.Client:
        url = self.api_urls[index % len(self.api_urls)]
        return httpx.Client(base_url=url, headers=ADMIN, timeout=httpx.Timeout(15.0, connect=3.0))

    # -- setup: the project and the first runs ------------------------------------------------

    def setup(self, deadline_seconds: float = 120.0) -> None:
        """Creates the project, then launches and executes ``runs`` runs from 8 threads."""
        deadline = time.monotonic() + deadline_seconds
        with self.client(0) as http:
            for _ in range(20):
                answer = self.recorder.call(http, "POST", "/v1/project-factory/projects", "POST project", json=DEMO_LIKE)
                if answer is not None and answer.status_code == 201:
                    self.slug = answer.json()["project_slug"]
                    break
                time.sleep(1)  # pacing: a client retrying after a refusal
        if not self.slug:
            raise RuntimeError("the project could not be created")
        threads = [threading.Thread(target=self._launcher, args=(n, deadline), name=f"launch-{n}") for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(1.0, deadline - time.monotonic()) + 20)
        if len(self.runs.ids()) < self.target_runs:
            raise RuntimeError(f"only {len(self.runs.ids())} of {self.target_runs} runs launched")

    def _launcher(self, n: int, deadline: float) -> None:
        with self.client(n) as http:
            while time.monotonic() < deadline and not self.stop.is_set():
                with self._lock:
                    if self.launched >= self.target_runs:
                        return
                    self.launched += 1
                if not self.launch(http):
                    with self._lock:
                        self.launched -= 1
                    time.sleep(0.5)  # pacing: a client retrying after a refusal

    def launch(self, http: httpx.Client) -> bool:
        body = {"template_id": "delivery-core", "project_slug": self.slug}
        answer = self.recorder.call(http, "POST", f"{STUDIO}/runs", "POST launch", json=body)
        if answer is None or answer.status_code != 201:
            return False
        run_id = answer.json()["run_id"]
        for _ in range(5):  # executed by one request: a retry only after an answer that is not 202
            executed = self.recorder.call(http, "POST", f"{STUDIO}/runs/{run_id}/execute", "POST execute", known=True)
            if executed is not None and executed.status_code == 202:
                self.runs.add(run_id)
                return True
            if executed is None:  # unknown whether it was recorded: the run is not counted as scheduled
                break
            time.sleep(0.5)  # pacing: a client retrying after a refusal
        self.runs.add(run_id, "ready")
        return True

    # -- the load -----------------------------------------------------------------------------

    def start(self) -> None:
        targets: list[tuple[str, Callable[[int], None]]] = [
            ("reader", self._reader), ("reader", self._reader), ("reader", self._reader),
            ("verbs", self._verbs), ("verbs", self._verbs), ("topup", self._topup),
        ]
        for n, (name, target) in enumerate(targets):
            thread = threading.Thread(target=self._guarded, args=(target, n), name=f"{name}-{n}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def finish(self, timeout: float = 30.0) -> list[str]:
        """Stops the clients; answers the names of threads that did not end in time."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        return [t.name for t in self._threads if t.is_alive()]

    def _guarded(self, target: Callable[[int], None], n: int) -> None:
        try:
            target(n)
        except Exception as exc:  # a client bug must show, not silently stop the load
            with self.recorder.lock:
                self.recorder.transport_errors[f"client crashed: {exc!r:.200}"] += 1

    def _clients_loop(self, seed: int, pause: float, step: Callable[[random.Random, list[httpx.Client]], None]) -> None:
        """Calls ``step`` every ``pause`` seconds until the load stops, with a client of each API."""
        rng = random.Random(seed)
        clients = [self.client(i) for i in range(len(self.api_urls))]
        try:
            for _ in range(1_000_000):
                if self.stop.wait(pause) or time.monotonic() > self.deadline:
                    return
                step(rng, clients)
        finally:
            for http in clients:
                http.close()

    def _reader(self, n: int) -> None:
        self._clients_loop(self.seed * 100 + n, 0.1, self._one_read)

    def _one_read(self, rng: random.Random, clients: list[httpx.Client]) -> None:
        run_id = self.runs.pick(rng, active=False)
        if run_id is None:
            return
        http = rng.choice(clients)
        what = rng.randrange(4)
        if what == 0:
            params = {"project_slug": self.slug, "run_id": run_id, "limit": 50}
            self.recorder.call(http, "GET", f"{PLANE}/observability-feed", "GET feed", known=True, params=params)
        elif what == 1:
            answer = self.recorder.call(http, "GET", f"{STUDIO}/runs/{run_id}/session-state", "GET session-state", known=True)
            if answer is not None and answer.status_code == 200:
                self.runs.seen(run_id, answer.json().get("status", ""))
        elif what == 2:
            params = {"project_slug": self.slug, "limit": 50}
            self.recorder.call(http, "GET", f"{PLANE}/runs", "GET fleet", params=params)
        else:
            answer = self.recorder.call(http, "GET", f"{STUDIO}/runs/{run_id}", "GET run", known=True)
            if answer is not None and answer.status_code == 200:
                self.runs.seen(run_id, answer.json().get("status", ""))

    def _verbs(self, n: int) -> None:
        def step(rng: random.Random, clients: list[httpx.Client]) -> None:
            run_id = self.runs.pick(rng)
            if run_id is not None:
                self._one_verb(rng, rng.choice(clients), run_id)

        self._clients_loop(self.seed * 1000 + n, 0.2, step)

    def _one_verb(self, rng: random.Random, http: httpx.Client, run_id: str) -> None:
        what = rng.random()
        if what < 0.5:
            answer = self.recorder.call(http, "GET", f"{STUDIO}/runs/{run_id}/session-state", "GET session-state", known=True)
            if answer is None or answer.status_code != 200:
                return
            state = answer.json()
            self.runs.seen(run_id, state.get("status", ""))
            live = [s for s in state.get("sessions", []) if s.get("live_status") not in ("session_completed", "stopped")]
            if not live:
                return
            session = rng.choice(live)
            body = dict(rng.choice(SESSION_VERBS))
            if rng.random() < 0.5:
                path = f"{PLANE}/runs/{run_id}/sessions/{session['session_id']}/control"
                self.recorder.call(http, "POST", path, "POST control session", known=True, json=body)
            else:
                body["target_agent_id"] = session["agent_id"]
                path = f"{STUDIO}/runs/{run_id}/control"
                self.recorder.call(http, "POST", path, "POST control admin", known=True, json=body)
        elif what < 0.75:
            body = dict(rng.choice(RUN_VERBS))
            self.recorder.call(http, "POST", f"{PLANE}/runs/{run_id}/control", "POST control run", known=True, json=body)
        elif what < 0.85:
            self.recorder.call(http, "POST", f"{STUDIO}/runs/{run_id}/execute", "POST execute", known=True)
        elif what < 0.97:
            body = {"url": f"https://preview.example/{rng.randrange(1000)}", "status": "live"}
            self.recorder.call(http, "POST", f"{STUDIO}/runs/{run_id}/preview", "POST preview", known=True, json=body)
        else:
            with self._lock:
                if self.replays >= max(2, self.target_runs // 10):
                    return
                self.replays += 1
            answer = self.recorder.call(http, "POST", f"{STUDIO}/runs/{run_id}/replay", "POST replay", known=True)
            if answer is not None and answer.status_code == 201:
                self.runs.add(answer.json()["run_id"], "ready")

    def _topup(self, n: int) -> None:
        """Keeps ``runs`` runs active: a finished run is replaced, up to ``max_runs`` launched."""
        with self.client(n) as http:
            for _ in range(100_000):
                if self.stop.wait(1.0) or time.monotonic() > self.deadline:
                    return
                with self._lock:
                    if len(self.runs.active()) >= self.target_runs or self.launched >= self.max_runs:
                        continue
                    self.launched += 1
                self.launch(http)
