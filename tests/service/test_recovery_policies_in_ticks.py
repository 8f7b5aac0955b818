"""The recovery policies at work: the simulator misbehaves, the ticker's policies recover."""

from __future__ import annotations

from domain.studio.commands.recovery import (
    CredentialPolicy,
    FirstToolPolicy,
    FreshWorkspacePolicy,
    SandboxStartPolicy,
    SelfHealPolicy,
    SuitProofPolicy,
    recovery_policies,
)
from domain.studio.control import ControlIntent
from domain.studio.policies.credentials import CredentialCheck
from domain.studio.policies.first_tool import FIRST_TOOL_REQUIRED, NOT_REQUIRED_TOOL_LABEL
from tests.events import named
from tests.service.recovery_support import TENANT, Squad
from workers.planes.simulator import FaultRates, Faults

SHARED = "ws-acme-shared"


def test_a_stale_first_tool_restarts_only_that_process_in_its_workspace_then_waits_for_the_operator() -> None:
    faults = Faults(FaultRates.none(first_tool_stall=0.5))
    squad = Squad(faults.rates, [FirstToolPolicy()])
    run_id = squad.launch(
        lambda seed: all(faults.stalls_first_tool(seed, "planner", attempt) for attempt in (1, 2, 3))
        and not faults.stalls_first_tool(seed, "curator", 1)
    )
    planner = squad.tick(
        run_id,
        lambda: (s := squad.session(run_id, "planner")).live_status == "blocked"
        and s.policy_attempts.get(FIRST_TOOL_REQUIRED) == 2
        and s,
    )
    restarts = squad.session_events(run_id, "planner", "ProcessRestarted")
    assert [(e.actor, e.reason, e.fresh_workspace, e.workspace_name) for e in restarts] == [
        ("policy", FIRST_TOOL_REQUIRED, False, SHARED)
    ] * 2
    assert planner.workspace_name == SHARED and planner.workspace_generation == 0
    probed_at = {e.at for e in squad.events(squad.lease(SHARED).id, "Verified")}
    assert {e.at for e in restarts} <= probed_at  # each restart probed its workspace, no fresh one
    labels = {e.evidence_label for e in squad.session_events(run_id, "planner", "ControllerActionObserved")}
    assert labels <= {NOT_REQUIRED_TOOL_LABEL} and planner.tool_call_count == 0
    # Only the stale process restarts: the curator, at work, was never touched.
    assert squad.session_events(run_id, "curator", "ProcessRestarted") == []
    assert squad.session(run_id, "curator").process_attempt == 1
    squad.tick(run_id, limit=10)
    assert squad.status(run_id, "planner") == "blocked"  # the budget is spent: the wall stays up

    squad.app.studio.control.control_session(
        tenant=TENANT, run_id=run_id, agent_id="planner", intent=ControlIntent(verb="retry_prompt"), actor="op@example.com"
    )
    planner = squad.session(run_id, "planner")
    assert planner.live_status == "ready" and planner.policy_attempts[FIRST_TOOL_REQUIRED] == 2  # operators don't count


def test_a_restarted_process_that_answers_the_probe_goes_to_work() -> None:
    faults = Faults(FaultRates.none(first_tool_stall=0.5))
    squad = Squad(faults.rates, [FirstToolPolicy()])
    run_id = squad.launch(
        lambda seed: faults.stalls_first_tool(seed, "planner", 1) and not faults.stalls_first_tool(seed, "planner", 2)
    )
    planner = squad.tick(run_id, lambda: (s := squad.session(run_id, "planner")).live_status == "working" and s)
    assert planner.process_attempt == 2 and planner.workspace_name == SHARED
    assert planner.policy_attempts == {}  # the first tool answered: a later stall starts a new budget
    assert [e.code for e in squad.session_events(run_id, "planner", "Blocked")] == [FIRST_TOOL_REQUIRED]


def test_a_corrupt_checkout_gets_a_fresh_workspace_and_the_old_one_keeps_no_slot() -> None:
    faults = Faults(FaultRates.none(checkout_corruption=0.5))
    squad = Squad(faults.rates, [FreshWorkspacePolicy(), FirstToolPolicy()])
    run_id = squad.launch(lambda seed: faults.corrupt_checkout(seed, "planner", 1, 0))
    planner = squad.tick(run_id, lambda: (s := squad.session(run_id, "planner")).live_status == "working" and s)
    assert planner.workspace_name == "ws-acme-fresh-planner-1" and planner.workspace_generation == 1
    restart = squad.session_events(run_id, "planner", "ProcessRestarted")[0]
    assert (restart.reason, restart.fresh_workspace, restart.workspace_name) == ("workspace_checkout_corrupt", True, SHARED)
    assert planner.session_id not in squad.lease(SHARED).slots
    assert planner.session_id in squad.lease("ws-acme-fresh-planner-1").slots


def test_pending_reprovision_with_a_stale_runner_clears_identity_and_requeues_a_launch() -> None:
    rates = FaultRates.none(sandbox_loss=1.0, pending_reprovision_share=1.0)
    squad = Squad(rates, [SelfHealPolicy()])
    run_id = squad.launch(lambda seed: Faults(rates).sandbox_signal(seed, "planner", 1) == "sandbox_missing")
    healed = squad.tick(run_id, lambda: squad.session_events(run_id, "planner", "SelfHealed"))
    assert healed[0].signal == "sandbox_missing" and healed[0].self_heal_status == "pending_reprovision"
    assert healed[0].cleared["workspace_name"] == SHARED and healed[0].cleared["llm_session_id"]
    restart = squad.session_events(run_id, "planner", "ProcessRestarted")[-1]
    assert (restart.reason, restart.actor, restart.llm_session_id) == ("self_heal", "policy", "")
    planner = squad.tick(run_id, lambda: (s := squad.session(run_id, "planner")).live_status == "working" and s)
    assert planner.process_attempt == 2 and planner.llm_session_id != healed[0].cleared["llm_session_id"]
    lease_events = squad.events(squad.lease(SHARED).id)
    released = [e for e in lease_events if named(e) == "SlotReleased" and e.session_id == planner.session_id]
    assert [e.reason for e in released] == ["self_heal"]  # the stale binding went with the identity
    assert planner.session_id in squad.lease(SHARED).slots  # the requeued launch bound afresh


def test_a_stale_runner_without_pending_reprovision_is_left_to_the_operator() -> None:
    rates = FaultRates.none(sandbox_loss=1.0, pending_reprovision_share=0.0)
    squad = Squad(rates, [SelfHealPolicy()])
    run_id = squad.launch()
    squad.tick(run_id, lambda: squad.status(run_id, "planner") == "blocked")
    squad.tick(run_id, limit=5)
    assert squad.status(run_id, "planner") == "blocked"
    assert not squad.session_events(run_id, "planner", "SelfHealed")


def test_container_creation_corruption_recreates_the_workspace_once_and_revives_the_binding() -> None:
    faults = Faults(FaultRates.none(start_corruption=0.5))
    squad = Squad(faults.rates, [SandboxStartPolicy()])
    run_id = squad.launch(
        lambda seed: faults.corrupt_container(seed, "planner", 0, 0) and not faults.corrupt_container(seed, "planner", 0, 1)
        and not faults.corrupt_container(seed, "curator", 0, 0)
    )
    planner = squad.tick(run_id, lambda: (s := squad.session(run_id, "planner")).live_status == "waiting_first_tool" and s)
    blocked = squad.session_events(run_id, "planner", "Blocked")[0]
    assert blocked.code == "sandbox_missing" and "container creation corruption" in blocked.evidence["start_error"]
    lease = squad.lease(SHARED)
    # The corrupted workspace is recreated once. (An agent that joins later may find its
    # own first start corrupted in the new workspace, which is then recreated in turn.)
    corrupted = blocked.evidence["provider_workspace_id"]
    recreated = [e for e in squad.events(lease.id, "Recreated") if e.previous_provider_workspace_id == corrupted]
    assert len(recreated) == 1 and planner.session_id in recreated[0].stale_sessions
    revived = [e for e in squad.events(lease.id, "SlotAcquired") if e.session_id == planner.session_id]
    assert [e.reused for e in revived][:2] == [False, True]  # the stale binding came back to life
    assert lease.slots[planner.session_id]["stale"] is False


def test_a_second_container_corruption_is_left_to_the_operator() -> None:
    squad = Squad(FaultRates.none(start_corruption=1.0), [SandboxStartPolicy()])
    run_id = squad.launch()
    squad.tick(run_id, lambda: squad.session(run_id, "planner").policy_attempts.get("sandbox_start_recovery") == 1
               and squad.status(run_id, "planner") == "blocked")
    squad.tick(run_id, limit=5)
    assert squad.status(run_id, "planner") == "blocked"
    # One recreation per corrupted start, never a second for the same agent.
    assert [e.reason for e in squad.session_events(run_id, "planner", "WorkspaceRestarted")] == ["sandbox_start_recovery"]
    assert squad.session(run_id, "planner").policy_attempts == {"sandbox_start_recovery": 1}
    assert len(squad.events(squad.lease(SHARED).id, "Recreated")) <= 2  # planner and curator at most


def test_a_missing_suit_handoff_is_spawned_by_the_planner() -> None:
    squad = Squad(FaultRates.none(), [SuitProofPolicy()])
    run_id = squad.launch()
    squad.tick(run_id, lambda: squad.status(run_id, "curator") == "working")
    # The curator (the suit carrier) is stopped at its first tool, before it requested any proof.
    assert not squad.session(run_id, "curator").handoffs_sent
    squad.app.studio.control.control_session(
        tenant=TENANT, run_id=run_id, agent_id="curator", intent=ControlIntent(verb="stop_session"), actor="op@example.com"
    )
    squad.tick(run_id, lambda: squad.session(run_id, "tester-guest") is not None and squad.session(run_id, "tester-admin"))
    sent = {e.target_agent_id: e for e in squad.session_events(run_id, "planner", "HandedOff")}
    assert {"tester-admin", "tester-guest"} <= set(sent)
    assert "missing" in sent["tester-admin"].reason
    assert squad.session(run_id, "tester-admin").suit["suit_id"] == "admin"


class Credentials:
    """A credential probe the test steers (a port the project owns)."""

    def __init__(self, check: CredentialCheck) -> None:
        self.check = check
        self.asked = 0

    def check_credentials(self, run: object, session: object) -> CredentialCheck:
        self.asked += 1
        return self.check


def test_credential_blockers_follow_the_profile_and_the_key_status() -> None:
    probe = Credentials(CredentialCheck(profile_resolved=False, session_credential_ref=""))
    squad = Squad(FaultRates.none(), [CredentialPolicy(probe)])
    run_id = squad.launch()
    squad.tick(run_id, limit=1)
    planner = squad.session(run_id, "planner")
    assert planner.blocker_code == "sandbox_api_credentials_not_configured"
    assert planner.blocker_evidence["profile_resolved"] is False

    probe.check = CredentialCheck(profile_resolved=True, key_status=403)
    squad.app.studio.control.control_session(
        tenant=TENANT, run_id=run_id, agent_id="planner", intent=ControlIntent(verb="restart_workspace"), actor="op@example.com"
    )
    squad.tick(run_id, limit=1)
    assert squad.session(run_id, "planner").blocker_code == "sandbox_api_credentials_invalid"

    # A resolving profile with an empty session row is no blocker: the agent starts.
    probe.check = CredentialCheck(profile_resolved=True, key_status=200, session_credential_ref="")
    squad.app.studio.control.control_session(
        tenant=TENANT, run_id=run_id, agent_id="planner", intent=ControlIntent(verb="restart_workspace"), actor="op@example.com"
    )
    assert squad.tick(run_id, lambda: squad.status(run_id, "planner") in ("waiting_first_tool", "working"))


def test_with_every_policy_only_the_operators_walls_stay_up() -> None:
    squad = Squad(FaultRates())  # the built-in plane's default fault rates
    squad.policies = recovery_policies(credentials=squad.plane)
    runs = [squad.launch() for _ in range(8)]
    for run_id in runs:
        squad.tick(run_id, limit=300)
    statuses = [squad.app.studio.runs.get_run(TENANT, r).status for r in runs]
    assert "completed" in statuses, statuses
    for run_id in runs:
        run = squad.app.studio.runs.get_run(TENANT, run_id)
        sessions = squad.app.studio.runs.all_sessions(run)
        blocked = {s.agent_id for s in sessions if s.live_status == "blocked"}
        # Whatever is still blocked is a wall the policies leave to the operator.
        steps = [step for p in squad.policies for step in p.plan(run, sessions, run.tick + 1)]
        assert not [step for step in steps if step.agent_id in blocked], steps
