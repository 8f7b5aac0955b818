"""Concurrent commands on one aggregate: each retried after a lost race until it is
applied, never refused for contention, never lost and never applied twice."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from projections.engine.runner import NotificationSource
from tests.helpers import DEMO_LIKE
from workers.bootstrap import Container


def test_concurrent_commands_on_one_run_lose_nothing(container: Container) -> None:
    app = container
    app.projects.create_project(tenant="default", request=DEMO_LIKE, created_by="op@example.com")
    run, _ = app.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="acme", launched_by="op")

    def upsert(n: int) -> str:
        app.studio.runs.share_preview(tenant="default", run_id=run.run_id, fields={"note": f"note-{n}"})
        return f"note-{n}"

    def kick(_: int) -> bool:
        app.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
        return True

    with ThreadPoolExecutor(max_workers=8) as pool:
        accepted = [n for n in pool.map(upsert, range(40)) if n]
        kicks = sum(pool.map(kick, range(40)))

    events = [e for e in NotificationSource(app.event_store).read(1, 10**6) if e.originator_id == run.id]
    shared = [e.event.preview["note"] for e in events if e.kind == "Run.PreviewShared"]
    requested = [e for e in events if e.kind == "Run.ExecutionRequested"]
    assert sorted(shared) == sorted(accepted) and len(accepted) == 40
    assert len(requested) == kicks == 40
    assert [e.version for e in events] == list(range(1, len(events) + 1))
    final = app.studio.runs.get_run("default", run.run_id)
    assert final.preview["note"] == shared[-1]
