"""Execution workspace leases: per-project isolation, slots, warm/suspend, resume, recreate once."""

from __future__ import annotations

import pytest

from domain.shared.clock import shift
from domain.shared.ids import derived_id
from domain.studio.control import ControlIntent
from domain.studio.lease import (
    RESUME_ESTIMATE_SECONDS,
    SUSPEND_AFTER_SECONDS,
    WARM_SECONDS,
    SlotsExhausted,
    WorkspaceLease,
)
from projections.engine.docs import MemoryDocs
from projections.engine.runner import NotificationSource
from projections.studio.workspace_mirror import MirrorProjector, compose_mirror, mirror_doc_key
from tests.service.recovery_support import TENANT, Squad
from workers.planes.simulator import FaultRates

T0 = "2026-03-01T08:00:00.000000Z"
GLOBEX = {
    "project_key": "globex",
    "repository_bindings": [{"repository_key": "backend", "vcs_repo_slug": "globex/api"}],
}


class Clock:
    """The service's clock, moved by the test (one second per tick)."""

    def __init__(self, start: str = T0) -> None:
        self.now = start

    def __call__(self) -> str:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now = shift(self.now, seconds)


def lease(max_slots: int = 2) -> WorkspaceLease:
    return WorkspaceLease(
        tenant=TENANT,
        project_slug="acme",
        workspace_name="ws-acme-shared",
        provider="sandbox",
        namespace="squadops-default-acme",
        target_branch="main",
        workspace_scope="project_shared",
        max_active_slots=max_slots,
        resume_estimate_seconds=RESUME_ESTIMATE_SECONDS,
        provider_workspace_id="sbx-0",
        at=T0,
    )


def acquire(w: WorkspaceLease, session_id: str) -> None:
    w.acquire_slot(
        run_id="run-1",
        session_id=session_id,
        agent_id=session_id,
        handoff_target="",
        recovery_reason="",
        at=T0,
        warm_until_at=shift(T0, WARM_SECONDS),
    )


def mirror(squad: Squad, project_slug: str, run_id: str | None = None) -> dict:
    docs = MemoryDocs()
    projector = MirrorProjector()
    for env in NotificationSource(squad.app.event_store).read(1, 10**9):
        if projector.wants(env):
            projector.apply(env, docs)
    sessions = []
    if run_id:
        run = squad.app.studio.runs.get_run(TENANT, run_id)
        sessions = [{"session_id": s.session_id} for s in squad.app.studio.runs.all_sessions(run)]
    return compose_mirror(docs.get(mirror_doc_key(TENANT, project_slug)), sessions, project_slug)


def ticking(squad: Squad, clock: Clock, run_ids: list[str], until, limit: int = 400) -> None:
    for _ in range(limit):
        if until():
            return
        clock.advance(1)
        squad.app.studio.ticks.tick_runs(squad.plane, tick=[(TENANT, r) for r in run_ids])
    raise AssertionError("condition not met")


def launch(squad: Squad, slug: str) -> str:
    run, _ = squad.app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug=slug, launched_by="op")
    squad.app.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op")
    squad.app.studio.ticks.tick_runs(squad.plane, start=[(TENANT, run.run_id)])
    return run.run_id


# -- slots ----------------------------------------------------------------------------------------


def test_slots_count_active_bindings_and_run_out() -> None:
    w = lease(max_slots=2)
    acquire(w, "ses-a")
    acquire(w, "ses-a")  # a process restart keeps its slot
    acquire(w, "ses-b")
    assert w.active_slot_count == 2 and w.max_active_slots == 2
    with pytest.raises(SlotsExhausted) as refused:
        acquire(w, "ses-c")
    assert refused.value.code == "execution_slots_exhausted"
    w.release_slot(session_id="ses-a", reason="session_completed", at=T0, suspend_after_at=shift(T0, SUSPEND_AFTER_SECONDS))
    acquire(w, "ses-c")
    assert sorted(w.slots) == ["ses-b", "ses-c"] and w.active_slot_count == 2


def test_an_exhausted_workspace_makes_the_next_start_wait_for_a_free_slot() -> None:
    clock = Clock()
    squad = Squad(FaultRates.none(), clock=clock)
    narrow = lease(max_slots=1)
    squad.app.event_store.save(narrow)
    run_id = launch(squad, "acme")
    ticking(squad, clock, [run_id], lambda: squad.status(run_id, "planner") != "ready" or squad.status(run_id, "curator") != "ready")
    ticking(squad, clock, [run_id], lambda: squad.app.studio.runs.get_run(TENANT, run_id).tick > 20)
    reports = [e.report for e in squad.events(squad.app.studio.runs.get_run(TENANT, run_id).id, "TickRecorded")]
    assert sum(r["rejected_steps"] for r in reports) > 0  # the second start met a full workspace
    started = [s for s in squad.app.studio.runs.all_sessions(squad.app.studio.runs.get_run(TENANT, run_id)) if s.process_attempt]
    live_in_workspace = [s for s in started if not s.ended]
    assert len(live_in_workspace) <= 1 and squad.lease("ws-acme-shared").active_slot_count <= 1


# -- isolation, warm, suspend, resume ------------------------------------------------------------------


def test_workspaces_are_isolated_per_project_warm_then_suspend_and_estimate_resume() -> None:
    clock = Clock()
    squad = Squad(FaultRates.none(), clock=clock)
    squad.app.projects.create_project(tenant=TENANT, request=GLOBEX, created_by="op")
    acme, globex = launch(squad, "acme"), launch(squad, "globex")
    ticking(squad, clock, [acme, globex], lambda: squad.lease("ws-acme-shared") and squad.app.event_store.get_or_none(
        f"wsl:{TENANT}:globex:ws-globex-shared"
    ))
    acme_lease = squad.lease("ws-acme-shared")
    acme_sessions = {s.session_id for s in squad.app.studio.runs.all_sessions(squad.app.studio.runs.get_run(TENANT, acme))}
    assert set(acme_lease.slots) <= acme_sessions and acme_lease.slots
    first = squad.events(acme_lease.id, "SlotAcquired")[0]
    assert first.warm_until_at == shift(first.at, WARM_SECONDS)
    view = mirror(squad, "acme", acme)
    assert view["isolation"] == "per_project" and view["workspace_count"] == 1
    assert [w["workspace_name"] for w in view["workspaces"]] == ["ws-acme-shared"]
    assert view["workspaces"][0]["live_status"] == "connected" and view["workspaces"][0]["resume_estimate_seconds"] == 0
    assert view["workspaces"][0]["warm_until_at"] >= first.warm_until_at
    assert [w["workspace_name"] for w in mirror(squad, "globex")["workspaces"]] == ["ws-globex-shared"]

    # acme's run ends; globex keeps the ticker busy while acme's workspace idles.
    ticking(squad, clock, [acme, globex], lambda: squad.app.studio.runs.get_run(TENANT, acme).ended)
    idle_since = squad.lease("ws-acme-shared").idle_since
    released = squad.events(acme_lease.id, "SlotReleased")[-1]
    assert released.suspend_after_at == shift(released.at, SUSPEND_AFTER_SECONDS)
    globex2 = launch(squad, "globex")  # a fresh run so the ticker keeps passing
    clock.now = shift(idle_since, SUSPEND_AFTER_SECONDS - 2)
    squad.app.studio.ticks.tick_runs(squad.plane, tick=[(TENANT, globex2)])
    assert squad.lease("ws-acme-shared").status == "ready"
    clock.now = shift(idle_since, SUSPEND_AFTER_SECONDS)
    squad.app.studio.ticks.tick_runs(squad.plane, tick=[(TENANT, globex2)])
    assert squad.lease("ws-acme-shared").status == "suspended"
    suspended = mirror(squad, "acme", acme)["workspaces"][0]
    assert suspended["workspace_status"] == "suspended" and suspended["live_status"] == "stopped"
    assert suspended["resume_estimate_seconds"] == RESUME_ESTIMATE_SECONDS
    assert suspended["suspend_after_at"] == released.suspend_after_at
    assert squad.app.event_store.get_or_none(f"wsl:{TENANT}:globex:ws-globex-shared").status == "ready"

    # A new run of acme resumes the workspace: warm again, nothing to wait for.
    acme2 = launch(squad, "acme")
    ticking(squad, clock, [acme2, globex2], lambda: squad.lease("ws-acme-shared").slots)
    resumed = mirror(squad, "acme", acme2)["workspaces"][0]
    assert resumed["workspace_status"] == "ready" and resumed["resume_estimate_seconds"] == 0


# -- recreate once ----------------------------------------------------------------------------------


def test_a_missing_workspace_is_recreated_once_and_its_bindings_revive() -> None:
    w = lease()
    acquire(w, "ses-a")
    assert w.recreate(reason="x", provider_workspace_id="sbx-1", at=T0) is False  # not missing
    w.mark_missing(reason="no such container", at=T0)
    assert w.recreate(reason="sandbox_missing", provider_workspace_id="sbx-1", at=T0) is True
    assert w.recreate(reason="sandbox_missing", provider_workspace_id="sbx-2", at=T0) is False  # once
    assert (w.status, w.recreations, w.provider_workspace_id) == ("ready", 1, "sbx-1")
    assert w.slots["ses-a"]["stale"] is True and w.active_slot_count == 0
    acquire(w, "ses-a")
    assert w.slots["ses-a"]["stale"] is False and w.active_slot_count == 1


def test_replaying_blockers_of_two_agents_in_one_lost_workspace_recreates_it_once() -> None:
    # A corrupt start loses the shared provider binding: both agents' starts fail there.
    rates = FaultRates.none(start_corruption=1.0)
    squad = Squad(rates, project={"project_key": "solo"})  # no lanes, no suits: just the intake pair
    run_id = squad.launch()
    squad.tick(run_id, lambda: squad.status(run_id, "planner") == "blocked" and squad.status(run_id, "curator") == "blocked")
    lease_id = squad.lease("ws-solo-shared").id
    assert squad.lease("ws-solo-shared").status == "missing"
    squad.app.studio.control.control_run(
        tenant=TENANT, run_id=run_id, intent=ControlIntent(verb="replay_blockers"), actor="op@example.com"
    )
    assert len(squad.events(lease_id, "Recreated")) == 1
    w = squad.lease("ws-solo-shared")
    assert w.status == "ready" and w.provider_workspace_id == derived_id("sbx", TENANT, "solo", "ws-solo-shared", 1)
    assert {squad.status(run_id, a) for a in ("planner", "curator")} == {"ready"}
    view = mirror(squad, "solo", run_id)["workspaces"][0]
    assert view["recovery_reason"] == "sandbox_recreated"
