"""Control-plane reads over real HTTP handling, on SQLite and on PostgreSQL.

The run is launched through the API, then driven through the domain with fixed steps (the
simulator's choices depend on a random run id), so every surface has a known answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.studio.feed_dto import FleetBoard, ObservabilityFeed
from tests.conftest import ADMIN, admin_api, settings_for
from tests.feed_scenarios import Scenario, apply_all
from workers.bootstrap import Container, build

FEED = "/control-plane/studio/observability-feed"
BOARD = "/control-plane/studio/runs"
MEMBER = {"x-edge-claim-email": "Dev@Example.com"}
STRANGER = {"x-edge-claim-email": "someone@example.com"}
PROJECT = {
    "project_key": "acme",
    "display_name": "Acme shop",
    "proposal_id": "proposal-42",
    "participants": [{"subject_key": "dev@example.com", "project_role": "contributor"}],
    "repository_bindings": [
        {"repository_key": "assembly", "vcs_repo_slug": "acme/assembly", "repository_type": "assembly"},
        {"repository_key": "backend", "vcs_repo_slug": "acme/api"},
    ],
    "project_assembly": {
        "sourceRefRepos": [{"slug": "acme/design-system", "branch": "main"}],
        "agentSquadSuitTesterRoles": ["admin"],
    },
}
STEPS = [
    ("join", "backend", 0),
    ("join", "tester-admin", 1),
    ("advance", 0, 1, 3, "backend", (0.5, 2000, 4, "success")),  # planner: start, first tool, work
    ("verb", 0, "comment_agent"),  # a message in the planner's mailbox
    ("tool", 0, "mcp__vcs__read_file"),
    ("advance", 2, 2, 2, "backend", (0.0, 0, 0, "success")),  # backend: start, first tool
    ("pr", 2, "backend", 7),
    ("finish", 2, (1.75, 64000, 12, "success")),
    ("advance", 3, 3, 2, "backend", (0.0, 0, 0, "success")),  # tester: start, first tool
    ("finish", 3, (-3.0, 500, 2, "success")),  # a negative cost is reported, never summed
    ("start", 1),  # curator waits for its first tool ...
    ("block", 1, "agent_first_tool_required"),  # ... and hits the wall
]


def wait(container: Container) -> None:
    assert container.runner.wait_for(container.event_store.max_position(), timeout=20)


@pytest.fixture
def world(database_url: str) -> Iterator[tuple[TestClient, Container]]:
    with admin_api(database_url) as served:
        yield served


def launch(http: TestClient, slug: str = "acme", headers: dict[str, str] | None = None) -> str:
    answer = http.post(
        "/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": slug}, headers=headers
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["run_id"]


def driven_run(http: TestClient, container: Container) -> str:
    assert http.post("/v1/project-factory/projects", json=PROJECT).status_code == 201
    run_id = launch(http)
    scenario = Scenario(app=container, run_id=run_id, request=PROJECT)
    apply_all(scenario, STEPS)
    assert len(scenario.applied) == len(STEPS), scenario.applied
    wait(container)
    return run_id


def feed(http: TestClient, run_id: str, **params: Any) -> ObservabilityFeed:
    answer = http.get(FEED, params={"project_slug": "acme", "run_id": run_id, **params})
    assert answer.status_code == 200, answer.text
    return msgspec.json.decode(answer.content, type=ObservabilityFeed, strict=True)


def test_every_surface_of_the_feed(world: tuple[TestClient, Container]) -> None:
    http, container = world
    run_id = driven_run(http, container)
    f = feed(http, run_id)
    assert f.run_id == run_id and f.project_slug == "acme"
    assert f.live_channel_topic == f"portal_live_events:tenant:default:run:{run_id}"
    # delivery: the pull request wins over the blocked curator
    assert f.delivery.status == "delivered"
    assert (f.delivery.pr_url, f.delivery.pr_owner, f.delivery.pr_repo, f.delivery.pr_number) == (
        "https://vcs.example/acme/api/pull/7", "acme", "api", 7,
    )
    # camelCase source references are references, shared to the HUD at run creation
    assert f.source_ref.mode == "github_array" and f.source_ref.hud_shared
    assert [r.slug for r in f.source_ref.repos] == ["acme/design-system"]
    assert f.proposal.proposal_id == "proposal-42" and f.proposal.bound
    assert (f.queue.state, f.queue.queued_at, f.queue.heartbeat_age_seconds) == ("idle", "", -1)
    assert (f.lineage.projected, f.lineage.impact_node_count) == (False, -1)
    # the tester (a reviewer) accepted; the operator's comment is a note
    assert (f.delivery_feedback.quality, f.delivery_feedback.accepted, f.delivery_feedback.notes_count) == ("good", True, 2)
    assert (f.evidence.proof_count, f.evidence.scope, f.evidence.has_chronicle) == (2, "implementation", False)
    assert f.progress.total_agents == 4 == f.pixel_agent_count == len(f.pixel_agents)
    assert (f.progress.completed, f.progress.blocked, f.progress.moving) == (2, 1, 1)
    assert f.run_cost.total_cost_usd == 1.75 and f.run_cost.agent_count_with_cost == 1
    friction = f.coordination_friction
    assert friction.first_tool_waiting_agents == ["curator"]
    assert friction.handoff_blocked_agents == []
    assert friction.mailbox_pending_count == 1
    assert (friction.known_duration_ms, friction.known_turn_count) == (64500, 14)
    assert f.latest_activity_at == f.freshness.latest_activity_at
    assert f.latest_activity_at == max(p.last_update_at for p in f.pixel_agents)
    pixels = {p.agent_id: p for p in f.pixel_agents}
    curator, backend, planner = pixels["curator"], pixels["backend"], pixels["planner"]
    assert (curator.pixel_state, curator.wall_code, curator.wall.recommended_action) == (
        "blocked", "agent_first_tool_required", "retry_prompt",
    )
    assert curator.tempo_phase == "waiting_first_tool"
    assert (curator.process_metrics.total_cost_usd, curator.process_metrics.duration_ms) == (0.0, -1)
    assert backend.process_metrics.total_cost_usd == 1.75 and backend.process_metrics.num_turns == 12
    assert backend.tempo_phase == "terminal" and backend.pixel_state == "idle"
    assert planner.pixel_state == "moving" and planner.current_tool_name == "mcp__vcs__read_file"
    assert planner.wall.recommended_action == "" and planner.mailbox_count == 1
    assert planner.armory_loadout.tool_names["vcs"] == ["mcp__vcs__read_file"]
    assert planner.armory_loadout.tool_names["board"] == ["mcp__board__*"]
    assert pixels["tester-admin"].armory_loadout.bundles == ["browser_proof", "error_tracking"]
    assert pixels["tester-admin"].process_metrics.total_cost_usd == -3.0  # reported as is
    assert planner.agent_process_provider == "codex" and planner.agent_nickname
    # the log dock: the curator's wall first (current state), then excerpts newest first
    first = f.runtime_logs[0]
    assert (first.evidence_scope, first.source, first.current_signal) == ("current_state", "sandbox/wall", "blocked:agent_first_tool_required")
    assert first.warning
    excerpts = f.runtime_logs[1:]
    assert all(e.evidence_scope == "diagnostic_excerpt" for e in excerpts)
    assert {"studio/session", "studio/activity", "studio/delivery", "sandbox/runner", "sandbox/wall"} <= {e.source for e in excerpts}
    assert [int(e.event_id) for e in f.live_events] == sorted((int(e.event_id) for e in f.live_events), reverse=True)
    assert f.event_count == len(f.live_events) and f.runtime_log_count == len(f.runtime_logs)
    assert f.execution_workspace_mirror.project_slug == "acme"
    assert f.execution_workspace_mirror.isolation == "per_project"
    # limit bounds live_events and runtime_logs, most recent first
    small = feed(http, run_id, limit=3)
    assert [e.event_id for e in small.live_events] == [e.event_id for e in f.live_events[:3]]
    assert len(small.runtime_logs) == small.runtime_log_count == 3
    assert small.event_count == f.event_count


def test_who_may_read_and_what_is_malformed(world: tuple[TestClient, Container]) -> None:
    http, container = world
    run_id = driven_run(http, container)
    query = {"project_slug": "acme", "run_id": run_id}
    bare = {"x-edge-claim-email": "", "x-edge-claim-groups": ""}
    assert http.get(FEED, params=query, headers=bare).json()["code"] == "unauthenticated"
    assert http.get(FEED, params=query, headers=bare).status_code == 401
    denied = http.get(FEED, params=query, headers={**STRANGER, "x-edge-claim-groups": ""})
    assert (denied.status_code, denied.json()["code"]) == (403, "not_a_participant")
    assert http.get(FEED, params=query, headers={**MEMBER, "x-edge-claim-groups": ""}).status_code == 200
    assert http.get(FEED, params={**query, "run_id": "run-unknown"}).json()["code"] == "run_not_found"
    assert http.get(FEED, params={**query, "project_slug": "nope"}).status_code == 404
    # another tenant with the same project slug never sees this tenant's run
    other = {"X-Squadops-Tenant-Id": "other"}
    assert http.post("/v1/project-factory/projects", json=PROJECT, headers=other).status_code == 201
    hidden = http.get(FEED, params=query, headers=other)
    assert (hidden.status_code, hidden.json()["code"]) == (404, "run_not_found")
    for bad, loc in [
        ({"limit": 0}, ["query", "limit"]),
        ({"limit": 201}, ["query", "limit"]),
        ({"run_id": "bad id!"}, ["query", "run_id"]),
        ({"as_of_event": 0}, ["query", "as_of_event"]),
        ({"as_of": "not a time"}, ["query", "as_of"]),
        ({"as_of": "2026-01-01T00:00:00Z", "as_of_event": 1}, ["query", "as_of"]),
    ]:
        answer = http.get(FEED, params={**query, **bad})
        assert answer.status_code == 422, (bad, answer.text)
        assert answer.json()["detail"][0]["loc"] == loc, (bad, answer.json())
    # A position the log has not reached yet conflicts with its state (retry later).
    ahead = http.get(FEED, params={**query, "as_of_event": 10**9})
    assert (ahead.status_code, ahead.json()["code"]) == (409, "position_ahead_of_log")
    missing = http.get(FEED, params={"run_id": run_id})
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"][:2] == ["query", "project_slug"]


def test_time_travel_over_http(world: tuple[TestClient, Container]) -> None:
    http, container = world
    assert http.post("/v1/project-factory/projects", json=PROJECT).status_code == 201
    run_id = launch(http)
    scenario = Scenario(app=container, run_id=run_id, request=PROJECT)
    apply_all(scenario, STEPS[:5])
    wait(container)
    then = container.event_store.max_position()
    earlier = http.get(FEED, params={"project_slug": "acme", "run_id": run_id})
    apply_all(scenario, STEPS[5:])
    wait(container)
    now = http.get(FEED, params={"project_slug": "acme", "run_id": run_id})
    assert now.content != earlier.content
    past = http.get(FEED, params={"project_slug": "acme", "run_id": run_id, "as_of_event": then})
    assert past.status_code == 200 and past.headers["x-squadops-as-of-event"] == str(then)
    assert past.content == earlier.content
    at = msgspec.json.decode(earlier.content)["latest_activity_at"]
    by_time = http.get(FEED, params={"project_slug": "acme", "run_id": run_id, "as_of": at})
    assert by_time.status_code == 200 and int(by_time.headers["x-squadops-as-of-event"]) <= then
    too_early = http.get(FEED, params={"project_slug": "acme", "run_id": run_id, "as_of": "2001-01-01T00:00:00Z"})
    assert (too_early.status_code, too_early.json()["code"]) == (404, "run_not_found")


def test_fleet_board_filters_and_pages(world: tuple[TestClient, Container]) -> None:
    http, container = world
    assert http.post("/v1/project-factory/projects", json=PROJECT).status_code == 201
    assert http.post("/v1/project-factory/projects", json={"project_key": "zeta"}).status_code == 201
    acme = [launch(http) for _ in range(5)]
    zeta = [launch(http, "zeta") for _ in range(2)]
    scenario = Scenario(app=container, run_id=acme[0], request=PROJECT)
    apply_all(scenario, STEPS)
    wait(container)
    board = msgspec.json.decode(http.get(BOARD).content, type=FleetBoard)
    assert [r.run_id for r in board.runs] == list(reversed(acme + zeta))  # newest first
    seen, cursor = [], ""
    while True:
        page = http.get(BOARD, params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        assert page["count"] == len(page["runs"]) <= 2
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == [r.run_id for r in board.runs]
    only_zeta = http.get(BOARD, params={"project_slug": "zeta"}).json()["runs"]
    assert [r["run_id"] for r in only_zeta] == list(reversed(zeta))
    blocked = http.get(BOARD, params={"status": "blocked"}).json()["runs"]
    assert [r["run_id"] for r in blocked] == [acme[0]]
    row = blocked[0]
    assert row["blockers"] == [{"agent_id": "curator", "blocker_code": "agent_first_tool_required"}]
    assert row["total_cost_usd"] == 1.75 and row["pr_count"] == 1 and row["time_to_first_pr_seconds"] >= 0
    assert row["progress"]["total_agents"] == 4 and "agents" not in row
    untouched = next(r for r in board.runs if r.run_id == zeta[0])
    assert (untouched.time_to_first_pr_seconds, untouched.status) == (-1, "ready")
    # a participant sees the runs of their projects only; a stranger sees none
    mine = http.get(BOARD, headers={**MEMBER, "x-edge-claim-groups": ""}).json()["runs"]
    assert {r["project_slug"] for r in mine} == {"acme"} and len(mine) == 5
    assert http.get(BOARD, headers={**STRANGER, "x-edge-claim-groups": ""}).json()["runs"] == []
    denied = http.get(BOARD, params={"project_slug": "zeta"}, headers={**MEMBER, "x-edge-claim-groups": ""})
    assert (denied.status_code, denied.json()["code"]) == (403, "not_a_participant")
    for bad in ({"status": "sleeping"}, {"cursor": "not a cursor"}, {"cursor": "abcde"}, {"limit": 0}):
        assert http.get(BOARD, params=bad).status_code == 422, bad
    # Any well-formed cursor is a board position: the page starts after it.
    assert http.get(BOARD, params={"cursor": "AQ"}).json()["runs"] == []  # before "\x01": nothing
    assert [r["run_id"] for r in http.get(BOARD, params={"cursor": "_-_-"}).json()["runs"]] == seen  # before all


def test_metrics_expose_positions_lag_appends_and_latency(world: tuple[TestClient, Container]) -> None:
    http, container = world
    run_id = driven_run(http, container)
    assert http.get(FEED, params={"project_slug": "acme", "run_id": run_id}).status_code == 200
    answer = http.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    text = answer.text
    head = container.event_store.max_position()
    assert f"squadops_events_appended_total {head}" in text
    for name in ("runs", "pixels", "surfaces", "log_dock", "fleet"):
        assert f'squadops_projection_position{{projector="{name}"}} {head}' in text
        assert f'squadops_projection_lag_events{{projector="{name}"}} 0' in text
    route = 'route="/control-plane/studio/observability-feed",status="200"'
    assert f'squadops_http_request_duration_seconds_count{{method="GET",{route}}} 1' in text
    # prometheus-client writes labels in name order, so ``le`` comes first
    assert f'squadops_http_request_duration_seconds_bucket{{le="+Inf",method="GET",{route}}} 1.0' in text


def test_a_surface_whose_projector_raised_leaves_the_rest_of_the_feed(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from projections.studio.surfaces import SurfacesProjector

    def broken(self: Any, env: Any, docs: Any) -> None:
        raise RuntimeError("surfaces projector is broken")

    monkeypatch.setattr(SurfacesProjector, "apply", broken)
    container = build(settings_for(database_url))
    try:
        with TestClient(create_app(container, workers=("projector",))) as http:
            http.headers.update(ADMIN)
            run_id = driven_run_without_surfaces(http, container)
            f = feed(http, run_id)
            assert f.delivery.status == "unknown" and f.queue.state == "unknown"  # defaults, typed
            assert f.source_ref.mode == "none" and f.evidence.proof_count == 0
            assert f.pixel_agent_count == 4 and f.progress.total_agents == 4  # the rest is intact
            assert f.run_cost.total_cost_usd == 1.75 and f.event_count > 0
            assert container.runner.stats.statuses["surfaces"].failures > 0
            assert 'squadops_projector_failures{projector="surfaces"}' in http.get("/metrics").text
    finally:
        container.close()


def driven_run_without_surfaces(http: TestClient, container: Container) -> str:
    assert http.post("/v1/project-factory/projects", json=PROJECT).status_code == 201
    run_id = launch(http)
    scenario = Scenario(app=container, run_id=run_id, request=PROJECT)
    apply_all(scenario, STEPS)
    others = [p.name for p in container.runner.projectors if p.name != "surfaces"]
    assert container.runner.wait_for(container.event_store.max_position(), timeout=20, names=others)
    return run_id


def test_the_feed_is_its_stored_document_and_access_is_checked_every_time(
    world: tuple[TestClient, Container],
) -> None:
    from api.studio.feed import FeedReads
    from projections.studio.feed_doc import FEED as FEED_MODEL
    from projections.studio.feed_doc import feed_doc_key
    from projections.studio.time_travel import EventSelector, TimeTravel

    http, container = world
    run_id = driven_run(http, container)
    reads = FeedReads(container.store, TimeTravel(EventSelector(container.event_store)), container.event_store.max_position)
    stored = container.store.get(FEED_MODEL, feed_doc_key("default", "acme", run_id))
    for limit in (1, 7, 50, 200):  # the stored answer, sliced: what a composition answers now
        assert reads.feed("default", "acme", run_id, limit) == reads.composed_feed("default", "acme", run_id, limit)
    assert reads.feed("default", "acme", run_id, 50) == stored
    # Over HTTP, who may read is decided by the access guard on every request.
    query = {"project_slug": "acme", "run_id": run_id}
    for _ in range(3):
        assert http.get(FEED, params=query).content == stored
        denied = http.get(FEED, params=query, headers={**STRANGER, "x-edge-claim-groups": ""})
        assert (denied.status_code, denied.json()["code"]) == (403, "not_a_participant")
    scenario = Scenario(app=container, run_id=run_id, request=PROJECT)
    apply_all(scenario, [("say", 0)])
    wait(container)  # projected in the same transaction as the models it is made of
    assert reads.feed("default", "acme", run_id, 50) != stored
    assert reads.feed("default", "acme", run_id, 50) == reads.composed_feed("default", "acme", run_id, 50)
