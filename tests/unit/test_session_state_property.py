"""One session state machine: every read model shows what the aggregate holds.

Generated histories drive real AgentSession aggregates through their commands (refused
commands change nothing); the events they record are stored by the service's own mapper
and transcoder, decoded by the projection engine and folded by the read models. After
every command, each session's ``live_status``, ``current_step`` and ``blocker_code`` in
the runs, pixels, fleet and surfaces read models equal the aggregate's.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from eventsourcing.persistence import Mapper, Notification
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.shared.errors import Conflict, Invalid, NotFound
from domain.studio.run import Run
from domain.studio.session import AgentSession
from projections.engine.docs import MemoryDocs
from projections.engine.envelope import Envelope, envelope
from projections.studio.fleet import FleetProjector, fleet_doc_key
from projections.studio.pixels import PixelsProjector, pixels_doc_key
from projections.studio.runs import RunsProjector, run_doc_key
from projections.studio.surfaces import SurfacesProjector, surfaces_doc_key
from workers.eventstore.transcoder import MsgspecTranscoder

TENANT, RUN_ID = "acme", "run-1"
AGENTS = ("planner", "builder", "tester")
AT = "2026-01-02T03:04:05.000006Z"
MAPPER = Mapper(transcoder=MsgspecTranscoder())


def _opened(run: Run, agent_id: str) -> AgentSession:
    session_id = f"ses-{agent_id}"
    run.open_session(agent_id=agent_id, session_id=session_id, role_key=f"role_{agent_id}", via="launch")
    return AgentSession(
        tenant=TENANT, run_id=RUN_ID, session_id=session_id, agent_id=agent_id, role_key=f"role_{agent_id}",
        alias=agent_id, title=agent_id, agent_nickname=agent_id, template_id="t", agent_process_kind="claude",
        agent_tier="", agent_pack="", execution_profile="", workload_groups=[], subject_key="", user_principal_name="",
        process={"provider": "p", "model": "m"}, mission_brief="", next_goal="", scenario_phase="", handoff_target="",
        joined_via={"kind": "launch"}, suit={}, spec_skill_ids=[], spec_mcp_server_ids=[],
        pr_required=agent_id == "builder",
    )


TOOLS = st.sampled_from(["mcp__vcs__read_file", "bash", "agent_mailbox", "hud_report", "mcp__catalog__find"])
CODES = st.sampled_from(["agent_first_tool_required", "sandbox_missing", "needs_review"])
RESUME = st.sampled_from(["", "working", "ready", "waiting_first_tool"])

COMMANDS = st.one_of(
    st.tuples(st.just("start"), st.none()),
    st.tuples(st.just("tool"), TOOLS),
    st.tuples(st.just("block"), CODES),
    st.tuples(st.just("unblock"), RESUME),
    st.tuples(st.just("hand_off"), st.sampled_from(AGENTS)),
    st.tuples(st.just("pull_request"), st.sampled_from(["assembly", "backend"])),
    st.tuples(st.just("pause"), st.none()),
    st.tuples(st.just("queue"), st.sampled_from(["", "wake"])),
    st.tuples(st.just("restart_process"), st.booleans()),
    st.tuples(st.just("restart_workspace"), st.booleans()),
    st.tuples(st.just("fail_start"), st.none()),
    st.tuples(st.just("self_heal"), st.none()),
    st.tuples(st.just("switch"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("message"), st.sampled_from(["mailbox", "thread", "controller"])),
    st.tuples(st.just("finish"), st.none()),
    st.tuples(st.just("stop"), st.none()),
)


def command(session: AgentSession, verb: str, arg: Any) -> None:
    common = {"actor": "op", "control_id": "ctl"}
    if verb == "start":
        session.start_process(llm_session_id="llm", skill_ids=[], mcp_server_ids=["vcs"], workspace_name="ws", at=AT)
    elif verb == "tool":
        session.call_tool(tool_name=arg, route="r", summary="s", at=AT)
    elif verb == "block":
        session.block(code=arg, message="wall", evidence={}, at=AT)
    elif verb == "unblock":
        session.unblock(resolution="fixed", actor="op", at=AT, resume_status=arg)
    elif verb == "hand_off":
        session.hand_off(target_agent_id=arg, target_session_id=f"ses-{arg}", reason="next", thread_id="th", at=AT)
    elif verb == "pull_request":
        session.open_pull_request(pr_url="https://x/pr/1", pr_owner="o", pr_repo="r", pr_number=1, repository_key=arg,
                                  at=AT, head_sha="c" * 40, changed_paths=["x.py"])
    elif verb == "pause":
        session.pause(at=AT, **common)
    elif verb == "queue":
        session.queue_request(message="go", wake_target=arg, at=AT, **common)
    elif verb == "restart_process":
        session.restart_process(reason="stall", at=AT, fresh_workspace=arg, **common)
    elif verb == "restart_workspace":
        session.restart_workspace(reason="sandbox_missing", at=AT, recreated=arg, **common)
    elif verb == "fail_start":
        session.fail_start(workspace_name="ws", provider_workspace_id="pw", error="gone", message="no such container",
                           at=AT)
    elif verb == "self_heal":
        session.self_heal(signal="no such container", at=AT)
    elif verb == "switch":
        session.switch_process(process={"provider": arg, "model": "m"}, takeover_handoff_id="h", reason="r", at=AT,
                               **common)
    elif verb == "message":
        session.deliver_message(channel=arg, message="hi", thread_id="th", at=AT, **common)
    elif verb == "finish":
        session.finish(result={"total_cost_usd": 0.5}, at=AT)
    elif verb == "stop":
        session.stop(actor="op", reason="done", at=AT)


class World:
    """The aggregates, and the read models folded from their stored events."""

    def __init__(self) -> None:
        self.position = 0
        self.projectors = [RunsProjector(), PixelsProjector(), FleetProjector(), SurfacesProjector()]
        self.docs = {p.name: MemoryDocs() for p in self.projectors}
        self.run = Run(
            tenant=TENANT, run_id=RUN_ID, project_slug="shop", template_id="t", agent_process_kind="claude",
            work_scope="", next_goal="", roster=[], source_ref={}, proposal={}, seed=1, launched_by="op",
            source_run_id="", project_facts=None,
        )
        self.sessions: dict[str, AgentSession] = {}
        self.flush(self.run)
        for agent_id in AGENTS:
            self.sessions[agent_id] = _opened(self.run, agent_id)
            self.flush(self.run)
            self.flush(self.sessions[agent_id])

    def flush(self, aggregate: Any) -> None:
        for domain_event in aggregate.collect_events():
            stored = MAPPER.to_stored_event(domain_event)
            self.position += 1
            note = Notification(
                id=self.position, originator_id=stored.originator_id,
                originator_version=stored.originator_version, topic=stored.topic, state=stored.state,
            )
            self.fold(envelope(note, MAPPER))

    def fold(self, env: Envelope) -> None:
        assert env.event is not None, env.kind  # every recorded event fits its contract
        for projector in self.projectors:
            if projector.wants(env):
                projector.apply(env, self.docs[projector.name])

    def views(self, agent_id: str) -> dict[str, tuple[str, ...]]:
        run = self.docs["runs"].get(run_doc_key(TENANT, RUN_ID))["sessions"][agent_id]
        pixels = self.docs["pixels"].get(pixels_doc_key(TENANT, RUN_ID))
        agent = next(a for a in pixels["pixel_agents"] if a["agent_id"] == agent_id)
        fleet = self.docs["fleet"].get(fleet_doc_key(TENANT, RUN_ID))["agents"][agent_id]
        surfaces = self.docs["surfaces"].get(surfaces_doc_key(TENANT, RUN_ID))["fold"]
        return {
            "runs": (run["live_status"], run["current_step"], run["blocker_code"]),
            "pixels": (agent["live_status"], agent["current_step"], pixels["fold"][agent_id]["blocker"]),
            "fleet": (fleet["live_status"], fleet["code"]),
            "surfaces.delivery": (surfaces["delivery"]["statuses"][agent_id],),
            "surfaces.queue": (surfaces["queue"]["statuses"][agent_id],),
        }


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(AGENTS), COMMANDS), max_size=40))
def test_every_read_model_shows_each_sessions_state_as_the_aggregate_holds_it(
    history: list[tuple[str, tuple[str, Any]]],
) -> None:
    world = World()
    for agent_id, (verb, arg) in history:
        session = world.sessions[agent_id]
        with suppress(Conflict, Invalid, NotFound):  # a refused command records nothing
            command(session, verb, arg)
        world.flush(session)
        for each, aggregate in world.sessions.items():
            truth = (aggregate.live_status, aggregate.current_step, aggregate.blocker_code)
            expected = {
                "runs": truth,
                "pixels": truth,
                "fleet": (truth[0], truth[2]),
                "surfaces.delivery": (truth[0],),
                "surfaces.queue": (truth[0],),
            }
            assert world.views(each) == expected, (each, verb, arg)
