"""The Run aggregate's lifecycle as a state machine (hypothesis) and by example."""

from __future__ import annotations

import copy

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from domain.shared.errors import Conflict
from domain.studio.run import (
    CLEANED_UP,
    COMPLETED,
    READY,
    RUNNING,
    SCHEDULED,
    STATUSES,
    Run,
    RunEnded,
)


def new_run(run_id: str = "run-1") -> Run:
    return Run(
        tenant="default",
        run_id=run_id,
        project_slug="acme",
        template_id="delivery-core",
        agent_process_kind="project_delivery",
        work_scope="scope",
        next_goal="goal",
        roster=[],
        source_ref={"mode": "none", "repos": [], "oci_version": "", "hud_shared": False},
        proposal={"proposal_id": "", "work_kind": "", "boundary": ""},
        seed=7,
        launched_by="op@example.com",
        source_run_id="",
        project_facts={},
    )


def replayed(run: Run) -> Run:
    """The run rebuilt from its own events, as the event store would."""
    events = list(run.collect_events())
    rebuilt = None
    for e in events:
        rebuilt = e.mutate(rebuilt)
    for e in events:  # keep the original usable for the next steps
        run.pending_events.append(e)
    return rebuilt


def test_a_new_run_is_ready_with_no_sessions() -> None:
    run = new_run()
    assert run.status == READY and run.sessions == {} and run.tick == 0
    assert run.id == "run:default:run-1"


def test_execution_is_fifo_friendly_follow_ups_keep_the_first_request_time() -> None:
    run = new_run()
    assert run.request_execution("2026-01-01T00:00:01.000000Z", "a") is False
    assert run.status == SCHEDULED
    assert run.request_execution("2026-01-01T00:00:09.000000Z", "a") is True
    assert run.queue_requested_at == "2026-01-01T00:00:01.000000Z"


def test_ticks_only_in_order_and_only_while_running() -> None:
    run = new_run()
    with pytest.raises(Conflict):
        run.record_tick(1, "t", {"status": "running"})
    run.request_execution("t0", "a")
    run.start_execution("t1")
    run.record_tick(1, "t2", {"status": "running"})
    with pytest.raises(Conflict):
        run.record_tick(3, "t3", {"status": "running"})


def test_an_ended_run_takes_no_further_commands() -> None:
    run = new_run()
    run.clean_up(at="t", actor="op", reason="done")
    for command in (
        lambda: run.request_execution("t", "a"),
        lambda: run.open_session("planner", "ses-1", "role_planner", "launch"),
        lambda: run.complete("t", {}),
        lambda: run.clean_up(at="t", actor="op", reason=""),
    ):
        with pytest.raises(RunEnded):
            command()


class RunMachine(RuleBasedStateMachine):
    """Any sequence of commands keeps the run's invariants; replay gives the same run."""

    def __init__(self) -> None:
        super().__init__()
        self.run = new_run()
        self.first_request = ""
        self.ticks = 0
        self.clock = 0

    def now(self) -> str:
        self.clock += 1
        return f"2026-01-01T00:00:{self.clock:02d}.000000Z"

    @rule()
    def request_execution(self) -> None:
        at = self.now()
        if self.run.ended:
            with pytest.raises(RunEnded):
                self.run.request_execution(at, "op")
            return
        follow_up = self.run.request_execution(at, "op")
        if not follow_up:
            self.first_request = at
        assert self.run.queue_requested_at == self.first_request

    @rule()
    def start(self) -> None:
        if self.run.status == SCHEDULED:
            self.run.start_execution(self.now())
            assert self.run.status == RUNNING
        else:
            with pytest.raises(Conflict):
                self.run.start_execution(self.now())

    @precondition(lambda self: self.run.status == RUNNING)
    @rule()
    def tick(self) -> None:
        self.ticks += 1
        self.run.record_tick(self.ticks, self.now(), {"status": "running"})

    @rule(agent=st.sampled_from(["planner", "curator", "backend", "tester-admin"]))
    def open_session(self, agent: str) -> None:
        if self.run.ended:
            with pytest.raises(RunEnded):
                self.run.open_session(agent, f"ses-{agent}", "role_x", "handoff")
        elif agent in self.run.sessions:
            with pytest.raises(Conflict):
                self.run.open_session(agent, f"ses-{agent}", "role_x", "handoff")
        else:
            self.run.open_session(agent, f"ses-{agent}", "role_x", "handoff")

    @rule()
    def complete(self) -> None:
        if self.run.ended:
            with pytest.raises(RunEnded):
                self.run.complete(self.now(), {})
        else:
            self.run.complete(self.now(), {})
            assert self.run.status == COMPLETED

    @rule()
    def clean_up(self) -> None:
        if self.run.ended:
            with pytest.raises(RunEnded):
                self.run.clean_up(at=self.now(), actor="op", reason="")
        else:
            self.run.clean_up(at=self.now(), actor="op", reason="")
            assert self.run.status == CLEANED_UP

    @invariant()
    def status_is_known_and_ticks_count_up(self) -> None:
        assert self.run.status in STATUSES
        assert self.run.tick == self.ticks

    @invariant()
    def replay_equals_live(self) -> None:
        rebuilt = replayed(self.run)
        live = copy.copy(self.run.__dict__)
        again = copy.copy(rebuilt.__dict__)
        live.pop("_pending_events"), again.pop("_pending_events")
        assert again == live


TestRunMachine = RunMachine.TestCase
TestRunMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
