"""A project's pull request numbers through the real event store: two tickers opening pull
requests of one project at the same moment get two numbers, and a log written before
numbering (the legacy fixture) still projects, its pull requests numbered on replay, with
numbering going on after them; every read model rebuilds to the same bytes."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

from domain.projects.pull_numbers import PullNumbers
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource
from projections.portal.notifications import OUTBOX
from projections.projects.pulls import pulls_partition
from tests.conftest import settings_for
from tests.helpers import DEMO_LIKE
from tests.service.test_legacy_log import FIXTURE
from workers.bootstrap import build
from workers.planes.simulator import FaultRates, SimulatorPlane
from workers.read_models import read_projectors

TENANT = "default"


def opened(container: Any) -> list[Any]:
    return [e for e in NotificationSource(container.event_store).read(1, 10**7) if e.kind == "AgentSession.PullRequestOpened"]


def launch(container: Any, slug: str) -> str:
    run, _ = container.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug=slug, launched_by="op")
    container.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op")
    return run.run_id


def test_two_tickers_opening_pull_requests_of_one_project_at_once_get_two_numbers(tmp_path: Path) -> None:
    """Each ticker saves only once both have numbered a pull request from the same copy of the
    numbering: one save wins, the other is refused on the version and numbered again."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    one, two = (build(settings_for(url, data_dir=str(tmp_path / name))) for name in ("one", "two"))
    try:
        one.projects.create_project(tenant=TENANT, request=DEMO_LIKE, created_by="op@example.com")
        runs = [launch(one, "acme"), launch(one, "acme")]
        both_numbered = threading.Barrier(2, timeout=60)
        refused = []

        def hold_first_numbering(container: Any) -> None:
            save = container.event_store.save
            held = threading.local()

            def saving(*aggregates: Any, **kwargs: Any) -> Any:
                numbering = [a for a in aggregates if isinstance(a, PullNumbers) and a.pending_events]
                if numbering and not getattr(held, "done", False):
                    held.done = True
                    both_numbered.wait()
                try:
                    return save(*aggregates, **kwargs)
                except Exception as exc:
                    refused.append(type(exc).__name__)
                    raise

            container.event_store.save = saving

        def drive(container: Any, run_id: str) -> None:
            plane = SimulatorPlane(data_dir=Path(container.settings.data_dir), faults=FaultRates.none())
            container.studio.ticks.tick_runs(plane, start=[(TENANT, run_id)])
            for _ in range(80):
                if any(e.run_id == run_id for e in opened(container)):
                    return
                container.studio.ticks.tick_runs(plane, tick=[(TENANT, run_id)])
            raise AssertionError(f"run {run_id} opened no pull request in 80 ticks")

        for container in (one, two):
            hold_first_numbering(container)
        threads = [threading.Thread(target=drive, args=(c, r)) for c, r in zip((one, two), runs, strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert refused, "the second save was not refused on the numbering's version"
        numbers = [e.event.project_number for e in opened(one)]
        assert len(numbers) >= 2 and sorted(numbers) == list(range(1, len(numbers) + 1))
        assert {e.run_id for e in opened(one)} == set(runs)
    finally:
        one.close()
        two.close()


def test_a_legacy_log_numbers_its_pull_requests_on_replay_and_numbering_goes_on_after_them(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(FIXTURE / "events.db", db)
    container = build(settings_for(f"sqlite:///{db}", data_dir=str(tmp_path / "data")))
    try:
        while container.runner.run_once():
            pass

        def pulls() -> list[dict]:
            return [json.loads(bytes(r.body)) for r in container.store.scan("pulls", partition=pulls_partition(TENANT, "acme"), limit=100)]

        legacy = pulls()
        # Nine pull requests, plane numbers 2, 0, 2, 1, 1, 2, 3, 0, 1: a free one is kept, the rest follow the highest.
        assert sorted(p["number"] for p in legacy) == list(range(1, 10))
        kept = {p["number"]: p["plane_number"] for p in legacy if p["number"] == p["plane_number"]}
        assert kept == {1: 1, 2: 2}  # (3 went to the second pull request, whose plane number was 0)

        run_id = launch(container, "acme")
        plane = SimulatorPlane(data_dir=tmp_path / "data", faults=FaultRates.none())
        container.studio.ticks.tick_runs(plane, start=[(TENANT, run_id)])
        for _ in range(80):
            if any(e.run_id == run_id for e in opened(container)):
                break
            container.studio.ticks.tick_runs(plane, tick=[(TENANT, run_id)])
        while container.runner.run_once():
            pass
        new = [p for p in pulls() if p["run_id"] == run_id]
        assert new and sorted(p["number"] for p in new) == list(range(10, 10 + len(new)))
        assert len(pulls()) == 9 + len(new)
        outbox = [d for d in (json.loads(bytes(r.body)) for r in container.store.dump(OUTBOX) if r.partition == "outbox")
                  if d["kind"] == "delivery"]
        assert outbox and all("vcs." not in d["body"] and d["url"].startswith("/projects/acme/pulls/") for d in outbox)

        live = {p.name: container.store.dump(p.name) for p in read_projectors()}
        rebuild(container.store, NotificationSource(container.event_store), read_projectors(), page_size=7)
        assert {p.name: container.store.dump(p.name) for p in read_projectors()} == live
    finally:
        container.close()
