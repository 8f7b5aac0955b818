"""Property tests: for any run the domain can record, the feed keeps every rule of the spec.

Hypothesis generates projects and operation sequences; the real aggregates record them
(in memory); the projectors fold the log; the composed feed is decoded strictly against
its schema and checked against the aggregates' own final state.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.studio.feed_dto import ObservabilityFeed
from domain.shared.event_store import EventStore
from domain.studio.policies.pixel import PIXEL_STATES
from domain.studio.policies.walls import RECOMMENDED
from projections.engine.docs import MemoryDocs
from projections.engine.runner import NotificationSource
from projections.engine.stamps import stamp
from projections.studio import time_travel
from projections.studio.feed import MAX_LIMIT, run_feed
from projections.studio.fleet import fleet_doc_key
from projections.studio.log_dock import CAPACITY, live_event
from projections.studio.time_travel import MemoryView
from tests.feed_scenarios import (
    OPERATIONS,
    TENANT,
    Scenario,
    apply_all,
    expected_source_mode,
    launch,
    project_requests,
)
from workers.bootstrap import wire_services

ENDED = ("session_completed", "stopped")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build_scenario(request: dict[str, Any], operations: list[tuple[Any, ...]]) -> Scenario:
    app = wire_services(EventStore({"PERSISTENCE_MODULE": "eventsourcing.popo"}))
    scenario = launch(app, request)
    apply_all(scenario, operations)
    return scenario


def fold(scenario: Scenario) -> tuple[list[Any], dict[str, MemoryDocs]]:
    envs = NotificationSource(scenario.app.event_store).read(1, 1_000_000)
    return envs, time_travel.fold(envs)


def feed_of(scenario: Scenario, docs: dict[str, MemoryDocs], limit: int = MAX_LIMIT) -> ObservabilityFeed:
    raw = run_feed(MemoryView(docs), TENANT, scenario.run_id, "acme", limit)
    return msgspec.json.decode(raw, type=ObservabilityFeed, strict=True)


def observed(
    request: dict[str, Any], operations: list[tuple[Any, ...]], limit: int = MAX_LIMIT
) -> tuple[Scenario, list[Any], dict[str, MemoryDocs], ObservabilityFeed]:
    """The run the operations record, its events, its folded documents and its feed."""
    scenario = build_scenario(request, operations)
    envs, docs = fold(scenario)
    return scenario, envs, docs, feed_of(scenario, docs, limit)


def reported(result: dict[str, Any], name: str) -> Any:
    value = result.get(name)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@FAST
@given(request=project_requests(), operations=st.lists(OPERATIONS, min_size=8, max_size=40))
def test_pixel_agents_follow_their_sessions(request: dict[str, Any], operations: list[tuple[Any, ...]]) -> None:
    scenario, _, docs, feed = observed(request, operations)
    sessions = scenario.sessions()
    assert [p.agent_id for p in feed.pixel_agents] == [s.agent_id for s in sessions]
    assert feed.pixel_agent_count == len(sessions)
    for pixel, session in zip(feed.pixel_agents, sessions, strict=True):
        assert pixel.session_id == session.session_id and pixel.role_key == session.role_key
        assert pixel.live_status == session.live_status
        assert pixel.pixel_state in PIXEL_STATES
        assert (pixel.pixel_state == "blocked") == (session.live_status == "blocked")
        assert (pixel.pixel_state == "resolved") == (session.live_status == "stopped")
        assert (pixel.tempo_phase == "terminal") == (session.live_status in ENDED)
        assert pixel.mailbox_count == session.mailbox_count
        # failed calls counted apart, and the model the CLI named (both absent until there is one)
        assert pixel.failed_tool_call_count == session.failed_tool_call_count
        assert pixel.model_ran == session.model_ran
        assert (
            pixel.agent_process_provider,
            pixel.agent_process_model,
            pixel.agent_process_effort,
            pixel.agent_process_speed,
        ) == (session.process["provider"], session.process["model"], session.process["effort"], session.process["speed"])
        if session.live_status == "blocked":
            assert pixel.wall_code == pixel.wall.code == session.blocker_code
            assert pixel.wall.recommended_action == RECOMMENDED.get(session.blocker_code, "nudge_agent") != ""
            assert pixel.wall.message
        else:
            assert pixel.wall_code == pixel.wall.code == pixel.wall.recommended_action == ""
        # process metrics: never invented
        metrics = pixel.process_metrics
        if session.live_status != "session_completed":
            assert (metrics.total_cost_usd, metrics.duration_ms, metrics.num_turns) == (0.0, -1, -1)
        else:
            cost = reported(session.result, "total_cost_usd")
            duration = reported(session.result, "duration_ms")
            turns = reported(session.result, "num_turns")
            assert metrics.total_cost_usd == (float(cost) if cost is not None else 0.0)
            assert metrics.duration_ms == (int(duration) if duration is not None and duration >= 0 else -1)
            assert metrics.num_turns == (int(turns) if turns is not None and turns >= 0 else -1)
        # armory: every server listed, a wildcard where no tool of it was seen
        armory = pixel.armory_loadout
        assert set(armory.mcp_server_ids) <= set(armory.tool_names)
        for server, names in armory.tool_names.items():
            assert names, server
            assert all(n.startswith(f"mcp__{server}__") for n in names)
            if names == [f"mcp__{server}__*"]:
                continue
            assert "*" not in "".join(names)
        assert ("error_tracking" in armory.bundles) == ("errors" in armory.tool_names)


@FAST
@given(request=project_requests(), operations=st.lists(OPERATIONS, min_size=8, max_size=40))
def test_progress_cost_and_friction(request: dict[str, Any], operations: list[tuple[Any, ...]]) -> None:
    scenario, _, docs, feed = observed(request, operations)
    sessions = scenario.sessions()
    p = feed.progress
    buckets = (p.active, p.waiting, p.blocked, p.moving, p.idle, p.completed)
    assert p.total_agents == sum(buckets) == len(sessions)
    assert p.completed == sum(1 for s in sessions if s.live_status in ENDED)  # completed wins over idle
    assert p.blocked == sum(1 for s in sessions if s.live_status == "blocked")
    costs = []
    for s in sessions:
        cost = reported(s.result, "total_cost_usd") if s.live_status == "session_completed" else None
        if cost is not None and cost > 0:
            costs.append(float(cost))
    assert feed.run_cost.total_cost_usd == round(math.fsum(costs), 6)
    assert feed.run_cost.agent_count_with_cost == len(costs)
    friction = feed.coordination_friction
    assert friction.first_tool_waiting_agents == [
        s.agent_id for s in sessions
        if s.live_status == "waiting_first_tool"
        or (s.live_status == "blocked" and s.blocker_code == "agent_first_tool_required")
    ]
    assert friction.handoff_blocked_agents == [
        s.agent_id for s in sessions if s.live_status == "blocked" and s.joined_via.get("kind") != "launch"
    ]
    assert friction.process_switch_handoff_required_agents == [
        s.agent_id for s in sessions if s.switch_pending and s.live_status not in ENDED
    ]
    assert friction.mailbox_pending_count == sum(s.mailbox_count for s in sessions)
    done = [s for s in sessions if s.live_status == "session_completed"]
    durations = [reported(s.result, "duration_ms") for s in done]
    turns = [reported(s.result, "num_turns") for s in done]
    assert friction.known_duration_ms == sum(int(v) for v in durations if v is not None and v >= 0)
    assert friction.known_turn_count == sum(int(v) for v in turns if v is not None and v >= 0)
    # the fleet board compares runs by the same rules
    row = docs["fleet"].get(fleet_doc_key(TENANT, scenario.run_id))
    assert row["progress"] == msgspec.to_builtins(p)
    assert row["total_cost_usd"] == feed.run_cost.total_cost_usd
    assert row["blocker_count"] == p.blocked


@FAST
@given(request=project_requests(), operations=st.lists(OPERATIONS, min_size=8, max_size=40))
def test_run_surfaces(request: dict[str, Any], operations: list[tuple[Any, ...]]) -> None:
    scenario, envs, docs, feed = observed(request, operations)
    sessions, run = scenario.sessions(), scenario.run()
    run_envs = [e for e in envs if e.run_id == scenario.run_id]
    # delivery: a pull request gives delivered, else a blocked session gives blocker
    prs = [e for e in run_envs if e.kind == "AgentSession.PullRequestOpened"]
    if prs:
        assert feed.delivery.status == "delivered"
        assert feed.delivery.pr_url == prs[-1].event.pr_url
    elif any(s.live_status == "blocked" for s in sessions):
        assert feed.delivery.status == "blocker"
    else:
        assert feed.delivery.status == "none"
    # source reference: priority oci > github_array > bundle > none, HUD-shared as the spec says
    mode = expected_source_mode(scenario.request)
    assert feed.source_ref.mode == mode
    assert feed.source_ref.hud_shared == (mode in ("oci", "github_array"))
    assert (feed.source_ref.oci_version != "") == (mode == "oci")
    # proposal
    assert feed.proposal.bound == bool(scenario.request["proposal_id"])
    assert feed.proposal.proposal_id == scenario.request["proposal_id"]
    # queue
    ticks = [e for e in run_envs if e.kind == "Run.TickRecorded"]
    assert (feed.queue.heartbeat_age_seconds == -1) == (not ticks)
    expected_state = {"ready": "idle", "scheduled": "queued", "completed": "idle", "cleaned_up": "idle"}.get(run.status)
    if run.status == "running":
        expected_state = "blocked" if any(s.live_status == "blocked" for s in sessions) else "running"
    assert feed.queue.state == expected_state
    # lineage is enrichment only
    assert feed.lineage.impact_node_count == -1
    catalog = any(e.kind == "AgentSession.ToolCalled" and e.event.tool_name.startswith("mcp__catalog__") for e in run_envs)
    assert feed.lineage.projected == catalog
    # feedback: a reviewer's change request wins over acceptance
    reviewers = {s.agent_id for s in sessions if s.role_key in ("role_tester", "role_curator")}
    verdicts = [
        e.event.result.get("subtype") for e in run_envs if e.kind == "AgentSession.Completed" and e.agent_id in reviewers
    ]
    followups = any(e.kind == "AgentSession.TaskCardChanged" and e.event.action == "followup_created" for e in run_envs)
    changes = followups or any(v in ("changes_requested", "error") for v in verdicts)
    if changes:
        assert feed.delivery_feedback.quality == "needs_changes" and not feed.delivery_feedback.accepted
    elif "success" in verdicts:
        assert feed.delivery_feedback.quality == "good" and feed.delivery_feedback.accepted
    else:
        assert feed.delivery_feedback.quality == "unknown" and not feed.delivery_feedback.accepted
    # evidence: de-duplicated proofs; an assembly pull request is no proof
    proofs = {f"pr:{e.event.pr_url}" for e in prs if e.event.repository_key != "assembly"}
    testers = {s.agent_id: (s.suit or {}).get("suit_id") or s.agent_id for s in sessions if s.role_key == "role_tester"}
    proofs |= {
        f"suit:{testers[e.agent_id]}"
        for e in run_envs
        if e.kind == "AgentSession.Completed" and e.agent_id in testers and not e.event.result.get("is_error")
    }
    assert feed.evidence.proof_count == len(proofs)
    # freshness: the max of stored timestamps, never the clock
    assert feed.latest_activity_at == feed.freshness.latest_activity_at == max(stamp(e) for e in run_envs)


@FAST
@given(
    request=project_requests(),
    operations=st.lists(OPERATIONS, min_size=8, max_size=50),
    limit=st.integers(min_value=1, max_value=MAX_LIMIT),
)
def test_log_dock_is_the_live_event_mapping_newest_first(
    request: dict[str, Any], operations: list[tuple[Any, ...]], limit: int
) -> None:
    scenario, envs, docs, feed = observed(request, operations, limit)
    items = [i for i in (live_event(e) for e in envs if e.run_id == scenario.run_id) if i is not None]
    expected = list(reversed(items))[: min(limit, CAPACITY)]
    assert [msgspec.to_builtins(e) for e in feed.live_events] == expected
    assert feed.event_count == len(items)
    assert len(feed.runtime_logs) == feed.runtime_log_count <= limit
    scopes = [log.evidence_scope for log in feed.runtime_logs]
    assert scopes == sorted(scopes, key=lambda s: s != "current_state")  # current state first
    excerpts = [log for log in feed.runtime_logs if log.evidence_scope == "diagnostic_excerpt"]
    assert [int(log.event_id) for log in excerpts] == sorted((int(log.event_id) for log in excerpts), reverse=True)
    current = [log.agent_id for log in feed.runtime_logs if log.evidence_scope == "current_state"]
    attention = [
        s.agent_id for s in scenario.sessions()
        if s.live_status in ("blocked", "paused", "waiting_first_tool") or (s.switch_pending and s.live_status not in ENDED)
    ]
    assert current == attention[: len(current)]
    assert feed.live_channel_topic == f"portal_live_events:tenant:{TENANT}:run:{scenario.run_id}"
