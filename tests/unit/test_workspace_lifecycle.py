"""The DevWorkspace lifecycle against the spec's table: a hypothesis state machine and examples."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from domain.shared.access import ProjectGrants
from domain.shared.errors import Forbidden
from domain.shared.event_store import EventStore
from domain.workspaces import policies
from domain.workspaces.commands import WorkspaceCommands
from domain.workspaces.workspace import (
    ERROR,
    PENDING,
    PROVISIONING,
    READY,
    RELEASE_REQUESTED,
    RELEASING,
    STATES,
    SUSPENDED,
    DevWorkspace,
    WorkspaceStateConflict,
)

# The spec's table, written out independently of the aggregate's own table.
SPEC = {
    (ERROR, "launch"): PENDING,
    (SUSPENDED, "launch"): PENDING,
    (PENDING, "pick_up"): PROVISIONING,
    (PROVISIONING, "provisioned"): READY,
    (PROVISIONING, "fail"): ERROR,
    (READY, "release"): RELEASE_REQUESTED,
    (RELEASE_REQUESTED, "begin_release"): RELEASING,
    (RELEASING, "stopped"): SUSPENDED,
    (READY, "auto_stop"): SUSPENDED,  # the idle stop: relaunch resumes it
}
MOVES = ("launch", "pick_up", "provisioned", "fail", "release", "begin_release", "stopped", "auto_stop")
T0 = "2026-01-01T00:00:00.000000Z"


def new_workspace() -> DevWorkspace:
    return DevWorkspace(
        at=T0, tenant="default", project_slug="acme", repository_key="backend", branch="main",
        employee="alice@example.com", employee_slug="alice", workspace_scope="acme-alice-0123456789",
        workspace_name="acme-backend-main", namespace="fops-dev-default-acme-alice-0123456789",
        provider_name="dev_workspace",
    )


def apply(ws: DevWorkspace, move: str, at: str = T0) -> None:
    if move == "launch":
        ws.launch(at, 90)
    elif move == "pick_up":
        ws.pick_up(at, "c1")
    elif move == "provisioned":
        ws.provisioned(at, "pod-1", ["/v/home", "/v/scratch"])
    elif move == "fail":
        ws.fail(at, "boom")
    elif move == "release":
        ws.request_release(at, "alice@example.com")
    elif move == "begin_release":
        ws.begin_release(at, "c1")
    elif move == "stopped":
        ws.stopped(at)
    else:
        ws.auto_stop(at)


class Lifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ws = new_workspace()
        self.model = PENDING

    @rule(move=st.sampled_from(MOVES))
    def attempt(self, move: str) -> None:
        before = self.ws.status
        pending_events = len(self.ws.pending_events)
        try:
            apply(self.ws, move)
        except WorkspaceStateConflict:
            assert (before, move) not in SPEC
            assert self.ws.status == before
            assert len(self.ws.pending_events) == pending_events  # refused before recording
            return
        if (before, move) in SPEC:
            self.model = SPEC[(before, move)]
        else:  # the only allowed non-transition: launching a live workspace marks it used
            assert move == "launch" and before in (PENDING, PROVISIONING, READY)
        assert self.ws.status == self.model

    @invariant()
    def status_is_known_and_error_has_reason(self) -> None:
        assert self.ws.status in STATES
        assert (self.ws.status == ERROR) == bool(self.ws.last_error)

    @invariant()
    def replay_gives_the_same_state(self) -> None:
        replayed = None
        for event in self.ws.pending_events:
            replayed = event.mutate(replayed)
        assert replayed is not None and replayed.status == self.ws.status


TestLifecycle = Lifecycle.TestCase
TestLifecycle.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


@pytest.mark.parametrize("start_moves", [["pick_up", "fail"], ["pick_up", "provisioned", "release", "begin_release", "stopped"], ["pick_up", "provisioned", "auto_stop"]])
def test_relaunch_from_error_or_suspended_requeues_pending(start_moves: list[str]) -> None:
    ws = new_workspace()
    for move in start_moves:
        apply(ws, move)
    assert ws.status in (ERROR, SUSPENDED)
    was = ws.status
    assert ws.launch(T0, 90) is True
    assert ws.status == PENDING and ws.last_error == ""
    assert ws.resume_estimate_seconds == (90 if was == SUSPENDED else 0)


def test_identity_namespace_and_scope_are_stable_per_tuple() -> None:
    h = policies.workspace_hash("default", "acme", "backend", "main", "Alice@Example.com")
    assert h == policies.workspace_hash("default", "acme", "backend", "main", "alice@example.com")
    assert h != policies.workspace_hash("default", "acme", "backend", "dev", "alice@example.com")
    ns = policies.namespace("default", "acme", "alice@example.com", h)
    assert ns == f"fops-dev-default-acme-alice-{h}" and len(ns) <= 63


class Who:
    def __init__(self, key: str, admin: bool = False) -> None:
        self.subject_key, self.is_super_admin = key, admin


def test_commands_guard_roles_key_and_requeue() -> None:
    grants = ProjectGrants("acme", {"o@x.io": "owner", "v@x.io": "viewer", "c@x.io": "contributor"})
    key = {"value": ""}
    cmds = WorkspaceCommands(EventStore(), clock=lambda: T0, proxy_client_key=lambda: key["value"])
    with pytest.raises(Forbidden) as viewer:
        cmds.launch(Who("v@x.io"), grants, tenant="default", repository_key="backend", branch="main")
    assert viewer.value.code == "dev_workspace_viewer_only"
    with pytest.raises(Forbidden) as stranger:
        cmds.launch(Who("s@x.io"), grants, tenant="default", repository_key="backend", branch="main")
    assert stranger.value.code == "dev_workspace_project_access_denied"
    with pytest.raises(Exception) as missing:
        cmds.launch(Who("c@x.io"), grants, tenant="default", repository_key="backend", branch="main")
    assert getattr(missing.value, "code", "") == "dev_workspace_proxy_client_token_missing"
    key["value"] = "k"
    ws = cmds.launch(Who("c@x.io"), grants, tenant="default", repository_key="backend", branch="main")
    assert ws.status == PENDING
    again = cmds.launch(Who("C@x.io"), grants, tenant="default", repository_key="backend", branch="main")
    assert again.id == ws.id and again.status == PENDING
    with pytest.raises(WorkspaceStateConflict):  # DELETE of a workspace that is not ready
        cmds.release("default", ws.workspace_scope, "c@x.io")
    assert cmds.claim(ws.id, lambda w: w.pick_up(T0, "c1")) is not None
    assert cmds.claim(ws.id, lambda w: w.pick_up(T0, "c2")) is None  # the second controller loses
