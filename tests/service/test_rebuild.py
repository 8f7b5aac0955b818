"""A rebuild from position 0 produces byte for byte the read models live projection produced.

Live projection folds in batches through the store (documents encoded and decoded between
batches, batch boundaries anywhere); a rebuild folds everything in memory and swaps the
result in. Both must agree for every read model, for any run the domain can record.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.shared.event_store import EventStore
from projections.engine.pg_store import PostgresDocStore
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource, ProjectionRunner
from projections.engine.store import DocStore, SqliteDocStore
from projections.studio.pixels import pixels_doc_key
from tests.conftest import settings_for
from tests.feed_scenarios import OPERATIONS, TENANT, apply_all, launch, project_requests
from workers.bootstrap import Services, eventsourcing_env, read_projectors, wire_services


def dumps(store: DocStore) -> dict[str, list[Any]]:
    return {p.name: store.dump(p.name) for p in read_projectors()}


def parts(url: str) -> tuple[Services, DocStore]:
    settings = settings_for(url)
    app = wire_services(EventStore(eventsourcing_env(settings)))
    store: DocStore = PostgresDocStore(url) if settings.is_postgres else SqliteDocStore(settings.sqlite_path)
    return app, store


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    request=project_requests(),
    operations=st.lists(OPERATIONS, min_size=5, max_size=40),
    page_size=st.integers(min_value=1, max_value=40),
    passes=st.lists(st.integers(min_value=0, max_value=2), min_size=40, max_size=40),
    budget=st.sampled_from([None, 0, 2048]),  # no bound; every document spilled at each page; some
)
def test_rebuild_equals_live_projection_byte_for_byte(
    request: dict[str, Any], operations: list[tuple[Any, ...]], page_size: int, passes: list[int], budget: int | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app, store = parts(f"sqlite:///{Path(tmp) / 'squadops.db'}")
        try:
            runner = ProjectionRunner(NotificationSource(app.event_store), store, read_projectors(), page_size=page_size)
            scenario = launch(app, request)
            step = iter(passes)

            def project_some() -> None:  # live batches end wherever the interleaving puts them
                for _ in range(next(step, 1)):
                    runner.run_once()

            apply_all(scenario, operations, after_each=project_some)
            while runner.run_once():
                pass
            assert set(runner.positions().values()) == {app.event_store.max_position()}
            live = dumps(store)
            report = rebuild(
                store, NotificationSource(app.event_store), read_projectors(), page_size=7, memory_bytes=budget
            )
            assert report.position == app.event_store.max_position()
            assert dumps(store) == live
        finally:
            store.close()
            app.event_store.close()


def test_rebuild_of_simulated_runs_on_postgres_swaps_in_without_half_built_reads(pg_url: str) -> None:
    from workers.bootstrap import build

    container = build(settings_for(pg_url, tick_seconds=0.001))
    try:
        app = container
        seed = {"project_key": "acme", "project_assembly": {"agentSquadSuitTesterRoles": ["admin", "guest", "ops"]}}
        app.projects.create_project(tenant=TENANT, request=seed, created_by="op@example.com")
        runs = [
            app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op@example.com")[0]
            for _ in range(3)
        ]
        for run in runs:
            app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op@example.com")
        for _ in range(60):
            container.runner.run_once()
            container.ticker.run_once()
        while container.runner.run_once():
            pass
        store = container.store
        with store.pool.connection() as conn:  # type: ignore[attr-defined]
            conn.execute("INSERT INTO rm_tracking (name, position) VALUES ('side_effects', 3)")
        live = dumps(store)
        key = pixels_doc_key(TENANT, runs[0].run_id)
        before = store.get("pixels", key)
        assert before is not None
        seen: list[bytes | None] = []
        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set():
                seen.append(store.get("pixels", key))

        thread = threading.Thread(target=reader)
        thread.start()
        figures: list[tuple[int, int, int, float]] = []
        report = rebuild(
            store,
            NotificationSource(app.event_store),
            read_projectors(),
            page_size=50,
            progress=lambda *a: figures.append(a),
        )
        stop.set()
        thread.join()
        assert dumps(store) == live
        assert seen and all(doc == before for doc in seen)  # readers never saw a half-built model
        assert store.positions()["side_effects"] == 3  # only read models were touched
        assert report.events >= app.event_store.max_position() and report.rate > 0
        positions = [position for position, *_ in figures]
        assert len(figures) > 2 and positions == sorted(positions)  # a page at a time, forward
        assert figures[-1][0] == figures[-1][1] == app.event_store.max_position()  # ends at the head it aimed for
    finally:
        container.close()


@pytest.mark.parametrize("budget", [None, 1024])
def test_events_appended_during_a_rebuild_are_in_the_swapped_model(tmp_path: Path, budget: int | None) -> None:
    app, store = parts(f"sqlite:///{tmp_path / 'squadops.db'}")
    try:
        runner = ProjectionRunner(NotificationSource(app.event_store), store, read_projectors())
        scenario = launch(app, {"project_key": "acme"})
        apply_all(scenario, [("advance", 0, 1, 3, "backend", (0.5, 10, 2, "success"))] * 4)
        while runner.run_once():
            pass
        appended: list[int] = []

        def append_once(*_: Any) -> None:
            if not appended:  # a command saved while the rebuild folds
                apply_all(scenario, [("advance", 1, 9, 4, "backend", (0.25, 5, 1, "success"))])
                appended.append(app.event_store.max_position())

        report = rebuild(
            store, NotificationSource(app.event_store), read_projectors(), page_size=3, progress=append_once,
            memory_bytes=budget,
        )
        assert appended and report.position <= appended[0]
        assert set(store.positions()[p.name] for p in read_projectors()) == {appended[0]}
        rebuilt = dumps(store)
        fresh_dir = tmp_path / "fresh"
        fresh_dir.mkdir()
        # the same log projected live from scratch gives the same rows
        fresh = SqliteDocStore(fresh_dir / "rm.db")
        try:
            live = ProjectionRunner(NotificationSource(app.event_store), fresh, read_projectors(), page_size=5)
            while live.run_once():
                pass
            assert {p.name: fresh.dump(p.name) for p in read_projectors()} == rebuilt
        finally:
            fresh.close()
    finally:
        store.close()
        app.event_store.close()


def test_rebuild_of_jobs_sync_identity_and_gate_equals_live_and_fires_no_side_effect(database_url: str, tmp_path: Path) -> None:
    import subprocess

    from tests.helpers import DEMO_LIKE
    from tests.jobs_support import LoopbackPowerDevice, service, write_connector

    device = LoopbackPowerDevice()
    try:
        with service(database_url, tmp_path, power_device_addr=device.addr, projection_page_size=3) as app:
            assert app.job_runner is not None
            app.projects.create_project(tenant=TENANT, request={**DEMO_LIKE, "proposal_id": "p-1"}, created_by="op@example.com")
            run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
            source = tmp_path / "connectors"
            write_connector(source, "idp", {"provider": "vcs"}, [{"subject_key": "ann@example.com", "provider_user_id": "1"}])
            requests = [
                ("access_sync", {"tenant_id": TENANT, "proposal_id": "p-1", "mode": "delta_cursor"}),
                ("access_sync", {"tenant_id": TENANT, "proposal_id": "p-1", "mode": "reconcile", "dry_run": True}),
                ("wizard_try", {"tenant_id": TENANT, "proposal_id": "p-1", "provider": "idp", "apply_binding": True, "ssot": {}}),
                ("node_power_sleep", {"tenant_id": TENANT, "node_name": "n1", "mac_address": "52:54:00:12:34:56", "verify_after_seconds": 0}),
            ]
            for job_type, request in requests:
                app.jobs.enqueue(tenant=TENANT, job_type=job_type, provider_kind="k", proposal_id=request.get("proposal_id"), request=request, requested_by="op")
            from domain.gate.commands import GateRequest
            from domain.jobs.identity import LinkFacts

            app.jobs.link_identity(tenant=TENANT, provider="board", facts=LinkFacts("bob@example.com", "7"), linked=True, source="test")
            for _ in range(20):  # live: small pages, projector and runner interleaved
                app.runner.run_once()
                app.job_runner.run_once()
            write_connector(source, "idp", {"provider": "vcs"}, [{"subject_key": "ann@example.com", "linked": False}])
            app.jobs.enqueue(tenant=TENANT, job_type="access_sync", provider_kind="k", proposal_id="p-1",
                             request={"tenant_id": TENANT, "proposal_id": "p-1", "mode": "delta_cursor", "x": 2}, requested_by="op")
            for _ in range(5):
                app.runner.run_once()
                app.job_runner.run_once()
            record = app.gate.run_thread(GateRequest(tenant=TENANT, thread_key=run.run_id, actor="op", agent_key="backend"))
            assert record["status"] == "published"
            while app.runner.run_once():
                pass
            jobs = [r for r in app.store.dump("jobs") if r.key.startswith("job/")]
            assert len(jobs) == 5 and {r.status for r in jobs} == {"succeeded"}
            bare = tmp_path / "vcs" / TENANT / "acme" / "api.git"  # the tenant's own repositories
            refs = subprocess.run(["git", "--git-dir", str(bare), "for-each-ref"], capture_output=True, text=True).stdout
            assert "refs/heads/" in refs
            sent = list(device.received)
            live = dumps(app.store)
            assert all(live[name] for name in ("jobs", "sync_checkpoints", "identity_links", "gate_runs", "gate_proposals"))
            rebuild(app.store, NotificationSource(app.event_store), read_projectors(), page_size=4)
            assert dumps(app.store) == live
            assert device.received == sent  # no datagram went out again
            assert subprocess.run(["git", "--git-dir", str(bare), "for-each-ref"], capture_output=True, text=True).stdout == refs
    finally:
        device.close()
