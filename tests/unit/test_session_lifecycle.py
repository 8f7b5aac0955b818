"""The AgentSession lifecycle: ready -> waiting_first_tool -> working -> session_completed."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from domain.shared.errors import Conflict, DomainError
from domain.studio.session import (
    BLOCKED,
    COMPLETED,
    LIVE_STATUSES,
    READY,
    STOPPED,
    WAITING_FIRST_TOOL,
    WORKING,
    AgentSession,
    SessionEnded,
)
from tests.events import named


def new_session(pr_required: bool = False) -> AgentSession:
    return AgentSession(
        tenant="default",
        run_id="run-1",
        session_id="ses-1",
        agent_id="backend",
        role_key="role_backend",
        alias="Backend",
        title="Backend lane",
        agent_nickname="keen-otter-0001",
        template_id="delivery-core",
        agent_process_kind="project_delivery",
        agent_tier="core",
        agent_pack="delivery",
        execution_profile="repository-cli",
        workload_groups=["delivery"],
        subject_key="backend@agents.squadops.local",
        user_principal_name="backend@agents.squadops.local",
        process={"provider": "codex", "model": "model-proxy codex alias", "effort": "medium", "speed": "standard"},
        mission_brief="",
        next_goal="",
        scenario_phase="delivery",
        handoff_target="",
        joined_via={"kind": "launch", "from_agent_id": ""},
        suit={},
        spec_skill_ids=["skill-backend-delivery"],
        spec_mcp_server_ids=["vcs"],
        pr_required=pr_required,
    )


def started(session: AgentSession) -> AgentSession:
    session.start_process(llm_session_id="llm-1", skill_ids=[], mcp_server_ids=["vcs"], workspace_name="ws", at="t")
    return session


def test_the_happy_path() -> None:
    session = new_session()
    assert session.live_status == READY and session.id == "ses:default:run-1:ses-1:backend"
    started(session)
    assert session.live_status == WAITING_FIRST_TOOL and session.llm_session_id == "llm-1"
    session.call_tool(tool_name="Read", route="delivery/backend", summary="", at="t")
    assert session.live_status == WORKING and session.tool_call_count == 1
    assert session.finish(result={"total_cost_usd": 0.1}, at="t")
    assert session.live_status == COMPLETED and session.ended


@pytest.mark.parametrize("action", ["dispatch_slot_prompt", "agent_mailbox", "acquire_execution_slot", "hud_report"])
def test_controller_actions_never_count_as_the_first_tool(action: str) -> None:
    session = started(new_session())
    session.call_tool(tool_name=action, route="", summary="", at="t")
    assert session.live_status == WAITING_FIRST_TOOL
    assert session.tool_call_count == 0 and session.controller_action_count == 1
    observed = [e for e in session.collect_events() if named(e) == "ControllerActionObserved"]
    assert observed[-1].evidence_label == "first_tool_not_required_tool"


def test_a_lane_without_a_pull_request_is_blocked_instead_of_completed() -> None:
    session = started(new_session(pr_required=True))
    session.call_tool(tool_name="Edit", route="", summary="", at="t")
    assert session.finish(result={}, at="t") is False
    assert session.live_status == BLOCKED
    assert session.blocker_code == "project_delivery_completion_requires_pr"
    session.unblock(resolution="intervened", actor="op", at="t")
    with pytest.raises(Conflict, match="no empty pull requests"):
        session.open_pull_request(pr_url="u", pr_owner="o", pr_repo="r", pr_number=1, repository_key="backend", at="t")
    session.open_pull_request(pr_url="u", pr_owner="o", pr_repo="r", pr_number=1, repository_key="backend", at="t",
                              head_sha="a" * 40, changed_paths=["orders.py"])
    assert session.finish(result={}, at="t") is True


def test_a_stopped_session_takes_nothing_more() -> None:
    session = started(new_session())
    session.stop(actor="op", reason="enough", at="t")
    assert session.live_status == STOPPED
    with pytest.raises(SessionEnded):
        session.call_tool(tool_name="Read", route="", summary="", at="t")


TOOLS = st.sampled_from(["Read", "Edit", "Bash", "dispatch_slot_prompt", "agent_mailbox", "hud_report"])


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.session = new_session()
        self.delivery_calls = 0

    def attempt(self, command) -> None:  # type: ignore[no-untyped-def]
        with contextlib.suppress(DomainError):
            command()

    @rule()
    def start(self) -> None:
        self.attempt(lambda: started(self.session))

    @rule(tool=TOOLS)
    def call(self, tool: str) -> None:
        before = self.session.live_status
        try:
            self.session.call_tool(tool_name=tool, route="", summary="", at="t")
        except DomainError:
            return
        if tool in ("Read", "Edit", "Bash"):
            self.delivery_calls += 1
            assert self.session.live_status == WORKING
        else:
            assert self.session.live_status == before

    @rule(code=st.sampled_from(["agent_first_tool_required", "sandbox_missing"]))
    def block(self, code: str) -> None:
        self.attempt(lambda: self.session.block(code=code, message="m", evidence={}, at="t"))

    @rule()
    def unblock(self) -> None:
        self.attempt(lambda: self.session.unblock(resolution="r", actor="op", at="t"))

    @rule()
    def finish(self) -> None:
        self.attempt(lambda: self.session.finish(result={}, at="t"))

    @rule()
    def stop(self) -> None:
        self.attempt(lambda: self.session.stop(actor="op", reason="", at="t"))

    @rule()
    def pause(self) -> None:
        self.attempt(lambda: self.session.pause(actor="op", control_id="c", at="t"))

    @rule()
    def resume(self) -> None:
        self.attempt(
            lambda: self.session.queue_request(message="go", wake_target="backend", actor="op", control_id="c", at="t")
        )

    @invariant()
    def counts_and_status(self) -> None:
        assert self.session.live_status in LIVE_STATUSES
        assert self.session.tool_call_count == self.delivery_calls
        blocked = self.session.live_status == BLOCKED or (
            self.session.live_status == "paused" and self.session.status_before_pause == BLOCKED
        )
        # A paused blocked session keeps its blocker; it is blocked again on resume.
        assert bool(self.session.blocker_code) == blocked

    @invariant()
    def ended_is_final(self) -> None:
        if self.session.ended:
            with pytest.raises((SessionEnded, Conflict)):
                self.session.call_tool(tool_name="Read", route="", summary="", at="t")


TestSessionMachine = SessionMachine.TestCase
TestSessionMachine.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
