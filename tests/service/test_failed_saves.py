"""Saves that the database fails, on the real PostgreSQL: nothing is lost, nothing applied
twice, and no aggregate's versions get a hole.

The faults are the database's own: a trigger that fails an insert, and a proxy that cuts
the connection right after PostgreSQL committed (the client never hears of the commit).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from domain.shared.event_store import EventStore
from domain.studio.control import ControlIntent
from projections.engine.runner import NotificationSource
from projections.engine.unavailable import DETAIL, unavailable
from tests.conftest import settings_for
from tests.helpers import DEMO_LIKE, drive_runs
from workers.bootstrap import Services, eventsourcing_env, wire_services
from workers.planes.simulator import SimulatorPlane

pytestmark = pytest.mark.pg

EVENTS = "squadops_events"


def versions_by_aggregate(app: Services) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for note in app.event_store.recorder.select_notifications(start=1, limit=1_000_000):
        found[note.originator_id].append(note.originator_version)
    return found


def assert_no_holes(app: Services) -> None:
    for aggregate_id, versions in versions_by_aggregate(app).items():
        assert sorted(versions) == list(range(1, len(versions) + 1)), (aggregate_id, versions)


@contextlib.contextmanager
def failing_inserts(url: str) -> Iterator[None]:
    """Every insert into the event log fails as a statement timeout would (an OperationalError)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION squadops_test_fail() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = 'query_canceled'; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER squadops_test_fail BEFORE INSERT ON {EVENTS} "
            "FOR EACH STATEMENT EXECUTE FUNCTION squadops_test_fail()"
        )
        try:
            yield
        finally:
            conn.execute(f"DROP TRIGGER squadops_test_fail ON {EVENTS}")


def test_a_tick_whose_save_fails_leaves_no_hole_in_any_aggregates_versions(pg_url: str) -> None:
    app = wire_services(EventStore(eventsourcing_env(settings_for(pg_url))))
    try:
        plane = SimulatorPlane()
        runs = drive_runs(app, runs=2, ticks=3)
        refs = [("default", r) for r in runs]
        # A run to start in the same pass: a pass whose runs all happen to be quiet saves
        # nothing (the simulator is seeded by the random run ids), but a start always saves.
        late, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug=str(DEMO_LIKE["project_key"]), launched_by="op")
        app.studio.runs.request_execution(tenant="default", run_id=late.run_id, requested_by="op")
        start = [("default", late.run_id)]
        with failing_inserts(pg_url), pytest.raises(Exception) as failed:
            app.studio.ticks.tick_runs(plane, tick=refs, start=start)
        assert unavailable(failed.value) is not None
        assert app.studio.runs.get_run("default", late.run_id).status == "scheduled"  # nothing of it stored
        for _ in range(5):  # the ticker's next passes, the database back (the late run still to start)
            app.studio.ticks.tick_runs(plane, tick=refs, start=start)
        assert app.studio.runs.get_run("default", late.run_id).status in ("running", "completed")
        assert_no_holes(app)
        fresh = wire_services(EventStore(eventsourcing_env(settings_for(pg_url))))  # no copies held: from the log
        try:
            assert all(fresh.studio.runs.get_run("default", r).run_id == r for r in [*runs, late.run_id])
        finally:
            fresh.event_store.close()
    finally:
        app.event_store.close()


class CommitCutter:
    """A TCP proxy to PostgreSQL that cuts connections at a COMMIT, ``times`` times: before
    the server gets it (nothing recorded), or right after the server reported it and before
    the client reads that (recorded, answer lost)."""

    REQUEST = b"Q\x00\x00\x00\x0bCOMMIT\x00"  # the simple query "COMMIT"
    ANSWER = b"C\x00\x00\x00\x0bCOMMIT\x00"  # CommandComplete "COMMIT"

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.marker = b""
        self.left = 0
        self.cuts = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes, times: int = 1) -> None:
        with self.lock:
            self.marker, self.left, self.cuts = marker, times, 0

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.target)
                threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
                threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _cut(self, data: bytes) -> bool:
        with self.lock:
            if self.left and self.marker in data:
                self.left -= 1
                self.cuts += 1
                return True
            return False

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while (data := source.recv(65536)) and not self._cut(data):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.listener.close()


def through(url: str, port: int) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    return f"postgresql://{info.get('user', 'postgres')}@127.0.0.1:{port}/{info['dbname']}"


def control_events(app: Services, control_id: str) -> list[Any]:
    envs = NotificationSource(app.event_store).read(1, 1_000_000)
    return [e for e in envs if e.kind == "Run.ControlRecorded" and e.event.control_id == control_id]


@pytest.fixture
def cut_app(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Services, CommitCutter, str]]:
    """The application through a ``CommitCutter``, with a launched run."""
    monkeypatch.setenv("PGSSLMODE", "disable")  # the proxy reads the protocol in clear
    info = psycopg.conninfo.conninfo_to_dict(pg_url)
    cutter = CommitCutter(str(info.get("host", "127.0.0.1")), int(info.get("port", 5432)))
    app = wire_services(EventStore(eventsourcing_env(settings_for(through(pg_url, cutter.port)))))
    try:
        app.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="op@example.com")
        run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="op")
        yield app, cutter, run.run_id
    finally:
        app.event_store.close()
        cutter.close()


def verify_wave(app: Services, run_id: str) -> str:
    intent = ControlIntent(verb="verify_wave")
    return app.studio.control.control_run(tenant="default", run_id=run_id, intent=intent, actor="op@example.com").control_id


def test_a_command_whose_commit_answer_is_lost_is_recorded_once(cut_app: tuple[Services, CommitCutter, str]) -> None:
    app, cutter, run_id = cut_app
    cutter.arm(CommitCutter.ANSWER)
    control_id = verify_wave(app, run_id)
    assert cutter.cuts == 1  # the commit's answer was lost indeed
    assert len(control_events(app, control_id)) == 1  # recorded, and once
    assert app.studio.runs.get_run("default", run_id).verification_waves == 1
    assert_no_holes(app)


def test_a_command_whose_commit_never_arrived_is_recorded_once_on_a_fresh_connection(
    cut_app: tuple[Services, CommitCutter, str],
) -> None:
    app, cutter, run_id = cut_app
    cutter.arm(CommitCutter.REQUEST)
    control_id = verify_wave(app, run_id)
    assert cutter.cuts == 1
    assert len(control_events(app, control_id)) == 1
    assert_no_holes(app)


def test_a_command_whose_commits_are_all_cut_is_unavailable_records_nothing_and_tries_twice_only(
    cut_app: tuple[Services, CommitCutter, str],
) -> None:
    app, cutter, run_id = cut_app
    cutter.arm(CommitCutter.REQUEST, times=100)
    with pytest.raises(Exception) as failed:
        verify_wave(app, run_id)
    outage = unavailable(failed.value)
    assert outage is not None and outage.message == DETAIL  # known: nothing was recorded
    assert cutter.cuts == 2
    cutter.arm(b"", times=0)
    assert app.studio.runs.get_run("default", run_id).verification_waves == 0
