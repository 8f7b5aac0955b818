"""C19 against the real server and the real PostgreSQL: a database that cannot be reached
answers 503 ``database_unavailable`` with ``Retry-After`` (within 2 s), never a 500 and
never a false 404; nothing accepted is lost or applied twice, and the workers resume by
themselves, their read models equal to a rebuild.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
import pytest

from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource
from projections.engine.unavailable import OUTCOME_UNKNOWN_DETAIL
from tests.conftest import ADMIN, settings_for
from tests.helpers import eventually
from tests.live_helpers import STUDIO, LiveServer
from workers.bootstrap import Container, build, read_projectors
from workers.cli import seed_demo

pytestmark = pytest.mark.pg

FEED = "/control-plane/studio/observability-feed"
OUTAGE_SECONDS = 5.0


def dbname(url: str) -> str:
    return str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])


def terminate_backends(admin: psycopg.Connection[Any], name: str) -> int:
    """Cuts every connection of the service (all but this admin one) to database ``name``."""
    row = admin.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        (name,),
    ).fetchone()
    return int(row[0]) if row else 0


@dataclass
class Answer:
    label: str
    status: int
    body: Any
    retry_after: str | None
    seconds: float

    @property
    def unavailable(self) -> bool:
        return (
            self.status == 503
            and isinstance(self.body, dict)
            and self.body.get("code") == "database_unavailable"
            and bool(self.body.get("detail"))
            and self.retry_after is not None
            and self.retry_after.isdigit()
        )

    @property
    def outcome_unknown(self) -> bool:
        return self.unavailable and self.body["detail"] == OUTCOME_UNKNOWN_DETAIL


@dataclass
class Client:
    http: httpx.Client
    answers: list[Answer] = field(default_factory=list)

    def call(self, label: str, method: str, path: str, **kwargs: Any) -> Answer:
        started = time.monotonic()
        response = self.http.request(method, path, **kwargs)
        try:
            body = response.json()
        except ValueError:
            body = response.text
        answer = Answer(label, response.status_code, body, response.headers.get("retry-after"), time.monotonic() - started)
        self.answers.append(answer)
        return answer


@contextlib.contextmanager
def service(pg_url: str) -> Iterator[tuple[Container, LiveServer]]:
    """The service with all its workers on a real server; the demo project seeded."""
    container = build(settings_for(pg_url, tick_seconds=0.2))  # runs live on through the test
    try:
        seed_demo(container.projects)
        with LiveServer(container) as server:
            yield container, server
    finally:
        container.close()


def launch_visible_run(http: httpx.Client) -> str:
    answer = http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "demo"})
    assert answer.status_code == 201, answer.text
    run_id = answer.json()["run_id"]
    assert http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202
    eventually(lambda: http.get(f"{FEED}", params={"project_slug": "demo", "run_id": run_id}).status_code == 200)
    return run_id


def caught_up(container: Container, head: int) -> bool:
    positions = container.store.positions()
    return all(positions.get(p.name, 0) >= head for p in container.runner.projectors) and (
        container.fanout.position() >= head
    )


def dumps(container: Container) -> dict[str, list[Any]]:
    return {p.name: container.store.dump(p.name) for p in read_projectors()}


def chain(client: Client, steady: str, outcomes: dict[str, list[tuple[str, Answer]]]) -> None:
    """One client's round: reads of a run known to exist, then a run's whole life by commands."""
    for label, path, params in (
        ("run", f"{STUDIO}/runs/{steady}", None),
        ("session_state", f"{STUDIO}/runs/{steady}/session-state", None),
        ("reports", f"{STUDIO}/runs/{steady}/reports", None),
        ("feed", FEED, {"project_slug": "demo", "run_id": steady}),
    ):
        client.call(label, "GET", path, params=params)
    launched = client.call("launch", "POST", f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "demo"})
    outcomes["launch"].append(("", launched))
    if launched.status != 201:
        return
    run_id = launched.body["run_id"]
    for label, path, body in (
        ("execute", f"{STUDIO}/runs/{run_id}/execute", None),
        ("verb", f"{STUDIO}/runs/{run_id}/control", {"verb": "verify_wave", "reason": "outage test"}),
        ("cleanup", f"{STUDIO}/runs/{run_id}/cleanup", {"reason": "outage test"}),
    ):
        answer = client.call(label, "POST", path, json=body)
        outcomes[label].append((run_id, answer))
        if answer.status >= 300:
            return  # never repeat a command whose answer was not a success


def run_clients(url: str, steady: str, until: Callable[[], bool], count: int = 3) -> tuple[list[Answer], dict[str, list[tuple[str, Answer]]]]:
    outcomes: dict[str, list[tuple[str, Answer]]] = {k: [] for k in ("launch", "execute", "verb", "cleanup")}
    clients = [Client(httpx.Client(base_url=url, headers=ADMIN, timeout=10)) for _ in range(count)]

    def work(client: Client) -> None:
        while not until():
            chain(client, steady, outcomes)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for c in clients:
        c.http.close()
    return [a for c in clients for a in c.answers], outcomes


def test_cutting_every_connection_repeatedly_answers_2xx_or_503_and_loses_nothing(
    pg_admin_url: str, pg_url: str
) -> None:
    name = dbname(pg_url)
    with service(pg_url) as (container, server), httpx.Client(base_url=server.url, headers=ADMIN, timeout=10) as http:
        steady = launch_visible_run(http)

        kills = 0
        stop = threading.Event()

        def killer() -> None:  # bursts of cuts 50 ms apart, and pauses in between
            nonlocal kills
            pauses = itertools.cycle((0.05,) * 8 + (0.4, 0.6))
            with psycopg.connect(pg_admin_url, autocommit=True) as admin:
                while not stop.wait(next(pauses)):
                    kills += terminate_backends(admin, name)

        cutting = threading.Thread(target=killer)
        deadline = time.monotonic() + OUTAGE_SECONDS
        cutting.start()
        try:
            answers, outcomes = run_clients(server.url, steady, lambda: time.monotonic() > deadline)
        finally:
            stop.set()
            cutting.join(10)

        assert kills > 10, f"the outage cut only {kills} connections"
        wrong = [a for a in answers if not (200 <= a.status < 300 or a.unavailable)]
        assert not wrong, [(a.label, a.status, a.body) for a in wrong]
        assert all(a.seconds < 2.0 for a in answers if a.status == 503), [(a.label, a.seconds) for a in answers if a.status == 503]
        assert len(answers) > 10
        slowest = max((a.seconds for a in answers if a.status == 503), default=0.0)
        print(f"{kills} connections cut; slowest 503 {slowest:.2f} s; answers: {Counter((a.label, a.status) for a in answers)}")

        # The service answers again, and its workers caught up without a restart.
        eventually(lambda: http.get(f"{STUDIO}/runs/{steady}").status_code == 200, timeout=30)
        head = eventually(lambda: http.get("/healthz").json().get("log_position"), timeout=30)
        eventually(lambda: caught_up(container, head), timeout=30)
        assert http.get(FEED, params={"project_slug": "demo", "run_id": steady}).status_code == 200

    # Workers stopped: nothing appends now. Finish projecting, then compare with a rebuild.
    container = build(settings_for(pg_url))
    try:
        while container.runner.run_once():
            pass
        events = NotificationSource(container.event_store).read(1, 10_000_000)
        assert_nothing_lost_or_doubled(events, outcomes, steady)
        live = dumps(container)
        rebuild(container.store, NotificationSource(container.event_store), read_projectors())
        assert dumps(container) == live
    finally:
        container.close()


def assert_nothing_lost_or_doubled(events: list[Any], outcomes: dict[str, list[tuple[str, Answer]]], steady: str) -> None:
    by_kind: dict[str, list[str]] = {}
    versions: dict[str, list[int]] = {}
    for env in events:
        by_kind.setdefault(env.kind, []).append(env.run_id)
        versions.setdefault(env.originator_id, []).append(env.version)
    holes = {k: v for k, v in versions.items() if sorted(v) != list(range(1, len(v) + 1))}
    assert not holes  # no save was built on copies ahead of the log
    launched = set(by_kind.get("Run.Launched", [])) - {steady}
    accepted = {a.body["run_id"] for _, a in outcomes["launch"] if a.status == 201}
    maybe = sum(1 for _, a in outcomes["launch"] if a.outcome_unknown)
    assert accepted <= launched  # nothing accepted is lost
    assert len(launched - accepted) <= maybe  # a refused launch recorded nothing
    for kind, label in (("Run.ExecutionRequested", "execute"), ("Run.ControlRecorded", "verb"), ("Run.CleanedUp", "cleanup")):
        recorded = by_kind.get(kind, [])
        for run_id, answer in outcomes[label]:
            count = recorded.count(run_id)
            if 200 <= answer.status < 300:
                assert count == 1, (label, run_id, count)  # once: not lost, not applied twice
            elif not answer.outcome_unknown:
                assert count == 0, (label, run_id, count)  # a 503 changed nothing
            else:
                assert count <= 1, (label, run_id, count)


def test_an_unreachable_database_answers_503_within_two_seconds_then_recovers(
    pg_admin_url: str, pg_url: str
) -> None:
    name = dbname(pg_url)
    with service(pg_url) as (container, server), httpx.Client(base_url=server.url, headers=ADMIN, timeout=5) as http:
        steady = launch_visible_run(http)
        client = Client(http)
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            try:
                assert terminate_backends(admin, name) > 0
                for label, method, path, kwargs in (
                    ("run", "GET", f"{STUDIO}/runs/{steady}", {}),
                    ("feed", "GET", FEED, {"params": {"project_slug": "demo", "run_id": steady}}),
                    ("launch", "POST", f"{STUDIO}/runs", {"json": {"template_id": "delivery-core", "project_slug": "demo"}}),
                    ("execute", "POST", f"{STUDIO}/runs/{steady}/execute", {}),
                    ("verb", "POST", f"{STUDIO}/runs/{steady}/control", {"json": {"verb": "verify_wave"}}),
                    ("cleanup", "POST", f"{STUDIO}/runs/{steady}/cleanup", {"json": {}}),
                ):
                    answer = client.call(label, method, path, **kwargs)
                    assert answer.unavailable and not answer.outcome_unknown, (label, answer)
                    assert answer.seconds < 2.0, (label, answer.seconds)
            finally:
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        # The database is back: the service resumes by itself.
        eventually(lambda: http.get(f"{STUDIO}/runs/{steady}").status_code == 200, timeout=30)
        head = eventually(lambda: http.get("/healthz").json().get("log_position"), timeout=30)
        eventually(lambda: caught_up(container, head), timeout=30)
        assert launch_visible_run(http)  # commands are accepted again


def test_a_service_started_before_its_database_accepts_connections_waits_for_it(
    pg_admin_url: str, pg_url: str
) -> None:
    name = dbname(pg_url)

    def allow() -> None:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')

    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    opening = threading.Timer(1.5, allow)  # the database comes up while the service starts
    opening.start()
    try:
        container = build(settings_for(pg_url))
        try:
            assert seed_demo(container.projects)
        finally:
            container.close()
    finally:
        opening.join(10)
        allow()
