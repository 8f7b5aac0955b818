"""The recovery policies as pure decisions: by example and by property (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.studio.policies import (
    first_tool_recovery,
    fresh_workspace,
    sandbox_start,
    self_heal,
    suit_proof,
)
from domain.studio.policies.blockers import (
    BLOCKERS,
    CHECKOUT_CORRUPT,
    CHECKPOINT_MISSING,
    CREDENTIALS_INVALID,
    CREDENTIALS_NOT_CONFIGURED,
    SANDBOX_MISSING,
    SOURCE_MATERIALIZATION_FAILED,
    lookup_error,
    lookup_failed_evidence,
)
from domain.studio.policies.credentials import CredentialCheck, credential_blocker
from domain.studio.policies.first_tool import FIRST_TOOL_REQUIRED, counts_as_first_tool
from domain.studio.policies.walls import RECOMMENDED, clears, wall_for

STATUSES = st.sampled_from(["ready", "waiting_first_tool", "working", "blocked", "paused", "session_completed", "stopped"])
CODES = st.sampled_from(sorted(BLOCKERS) + ["", "something_else"])
TEXT = st.text(max_size=40)


# -- first tool -----------------------------------------------------------------------------------


def test_first_tool_restarts_in_the_same_workspace_then_leaves_it_to_the_operator() -> None:
    decide = first_tool_recovery.decide
    assert decide("blocked", FIRST_TOOL_REQUIRED, 0) == first_tool_recovery.RESTART_SAME_WORKSPACE
    assert decide("blocked", FIRST_TOOL_REQUIRED, 1) == first_tool_recovery.RESTART_SAME_WORKSPACE
    assert decide("blocked", FIRST_TOOL_REQUIRED, 2) == first_tool_recovery.LEAVE_TO_OPERATOR
    assert decide("waiting_first_tool", "", 0) == first_tool_recovery.NOTHING
    assert decide("blocked", SANDBOX_MISSING, 0) == first_tool_recovery.NOTHING


@given(STATUSES, CODES, st.integers(min_value=0, max_value=50), st.integers(min_value=0, max_value=5))
def test_first_tool_acts_only_on_its_blocker_and_within_its_budget(status: str, code: str, used: int, budget: int) -> None:
    decision = first_tool_recovery.decide(status, code, used, max_restarts=budget)
    if status != "blocked" or code != FIRST_TOOL_REQUIRED:
        assert decision == first_tool_recovery.NOTHING
    else:
        assert (decision == first_tool_recovery.RESTART_SAME_WORKSPACE) == (used < budget)


@given(st.sampled_from(["dispatch_slot_prompt", "agent_mailbox", "acquire_execution_slot", "hud_report", "hud_live_report"]))
def test_controller_actions_never_satisfy_the_first_tool(action: str) -> None:
    assert not counts_as_first_tool(action)


# -- fresh workspace --------------------------------------------------------------------------------


def test_only_three_causes_justify_a_fresh_workspace() -> None:
    cause = fresh_workspace.fresh_workspace_cause
    assert cause(SOURCE_MATERIALIZATION_FAILED) == "source_materialization_failure"
    assert cause(CHECKOUT_CORRUPT) == "corrupt_checkout"
    assert cause(CHECKPOINT_MISSING) == ""  # only after terminal cleanup
    assert cause(CHECKPOINT_MISSING, {"afterTerminalCleanup": True}) == "missing_runtime_memory_checkpoint"
    for code in (FIRST_TOOL_REQUIRED, SANDBOX_MISSING, "session_reset", ""):
        assert cause(code, {"after_terminal_cleanup": True}) == ""


@given(STATUSES, CODES, st.dictionaries(st.sampled_from(["after_terminal_cleanup", "x"]), st.booleans()), st.integers(0, 5))
def test_a_reset_is_never_a_fresh_workspace(status: str, code: str, evidence: dict, used: int) -> None:
    decision = fresh_workspace.decide(status, code, evidence, used)
    if decision == fresh_workspace.FRESH_WORKSPACE:
        assert status == "blocked" and code in fresh_workspace.CAUSES and used < fresh_workspace.MAX_AUTOMATIC_FRESH
    if code not in fresh_workspace.CAUSES:
        assert decision == fresh_workspace.NOTHING


# -- self-heal --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "signal"),
    [
        ("sandbox_toolbox_observe_failed", "sandbox_toolbox_observe_failed"),
        ("sandbox_missing", "sandbox_missing"),
        ("the sandbox was reaped by the node", "sandbox_reaped"),
        ("Error: No such container: 3f9c", "no_such_container"),
        ("detached runner process not alive (pid 77)", "runner_process_not_alive"),
        ("all fine", ""),
    ],
)
def test_stale_runner_signals_are_read_from_codes_messages_and_output(text: str, signal: str) -> None:
    assert self_heal.stale_runner_signal([text]) == signal


def test_self_heal_needs_both_pending_reprovision_and_a_stale_signal() -> None:
    assert self_heal.decide("pending_reprovision", "sandbox_missing") == self_heal.REQUEUE_FRESH_LAUNCH
    assert self_heal.decide("pending_reprovision", "") == self_heal.NOTHING
    assert self_heal.decide("", "sandbox_missing") == self_heal.NOTHING
    assert self_heal.self_heal_status({"executionWorkspaceSelfHealStatus": "pending_reprovision"}) == "pending_reprovision"
    assert self_heal.cleared_identity({"workspace_name": "ws", "llm_session_id": "", "x": "y"}) == {"workspace_name": "ws"}


@given(st.text(max_size=30), st.lists(TEXT, max_size=4))
def test_self_heal_never_fires_without_pending_reprovision(status: str, texts: list[str]) -> None:
    signal = self_heal.stale_runner_signal(texts)
    decision = self_heal.decide(status, signal)
    assert (decision == self_heal.REQUEUE_FRESH_LAUNCH) == (status == "pending_reprovision" and bool(signal))


# -- sandbox start recovery -------------------------------------------------------------------------


def test_container_creation_corruption_is_recreated_once() -> None:
    evidence = {"start_error": "container creation corruption: overlay checksum mismatch"}
    assert sandbox_start.decide("blocked", SANDBOX_MISSING, evidence, 0) == sandbox_start.RECREATE_ONCE
    assert sandbox_start.decide("blocked", SANDBOX_MISSING, evidence, 1) == sandbox_start.LEAVE_TO_OPERATOR
    assert sandbox_start.decide("blocked", SANDBOX_MISSING, {"start_error": "quota exceeded"}, 0) == sandbox_start.NOTHING
    assert sandbox_start.decide("blocked", SANDBOX_MISSING, {}, 0) == sandbox_start.NOTHING
    assert sandbox_start.is_container_creation_corruption("Corrupted container image layer")


# -- credentials ------------------------------------------------------------------------------------


def test_credentials_not_configured_only_when_the_profile_cannot_resolve() -> None:
    assert credential_blocker(CredentialCheck(profile_resolved=False)) == CREDENTIALS_NOT_CONFIGURED
    # An empty session row alone proves nothing.
    assert credential_blocker(CredentialCheck(profile_resolved=True, key_status=200, session_credential_ref="")) == ""
    assert credential_blocker(CredentialCheck(profile_resolved=None, session_credential_ref="")) == ""


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_invalid_not_missing(status: int) -> None:
    assert credential_blocker(CredentialCheck(profile_resolved=True, key_status=status)) == CREDENTIALS_INVALID


@given(st.sampled_from([True, None]), st.one_of(st.none(), st.integers(100, 599)), st.text(max_size=20))
def test_a_resolving_profile_is_never_not_configured(resolved: bool | None, status: int | None, row: str) -> None:
    code = credential_blocker(CredentialCheck(profile_resolved=resolved, key_status=status, session_credential_ref=row))
    assert code != CREDENTIALS_NOT_CONFIGURED
    assert (code == CREDENTIALS_INVALID) == (status in (401, 403))


# -- suit proof -------------------------------------------------------------------------------------


SUITS = [{"suit_id": "admin", "role_key": "role_tester"}, {"suit_id": "guest", "role_key": "role_tester"}]


def member(agent_id: str, groups: tuple[str, ...], live: bool = True, suit: str = "") -> suit_proof.Member:
    return suit_proof.Member(agent_id=agent_id, workload_groups=groups, live=live, suit_id=suit)


def test_a_suit_is_missing_only_when_no_live_curator_will_spawn_it() -> None:
    planner = member("planner", ("coordination", "lanes"))
    curator = member("curator", ("coordination", "suits"))
    assert suit_proof.missing_suit_handoffs(SUITS, [planner, curator]) == []
    stopped = member("curator", ("coordination", "suits"), live=False)
    tester = member("tester-admin", ("proof",), suit="admin")
    assert suit_proof.missing_suit_handoffs(SUITS, [planner, stopped, tester]) == [SUITS[1]]
    assert suit_proof.missing_suit_handoffs(SUITS, [planner, stopped], handed_off=["tester-guest"]) == [SUITS[0]]
    assert suit_proof.spawner([stopped, planner]) == "planner"
    assert suit_proof.spawner([stopped]) == ""


@given(st.lists(st.sampled_from(["admin", "guest", "ops"]), unique=True), st.booleans())
def test_every_suit_ends_up_proven_or_owed(proven: list[str], curator_live: bool) -> None:
    suits = [{"suit_id": s} for s in ("admin", "guest", "ops")]
    members = [member("curator", ("coordination", "suits"), live=curator_live)]
    members += [member(f"tester-{s}", ("proof",), suit=s) for s in proven]
    missing = {s["suit_id"] for s in suit_proof.missing_suit_handoffs(suits, members)}
    if curator_live:
        assert missing == set()
    else:
        assert missing == {"admin", "guest", "ops"} - set(proven)


# -- walls and blockers -----------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(BLOCKERS))
def test_every_blocker_has_a_wall_whose_verb_clears_it(code: str) -> None:
    wall = wall_for(code)
    assert wall.code == code and wall.message and wall.recommended_action
    assert clears(wall.recommended_action, code)
    assert code in RECOMMENDED


def test_lookup_failures_carry_the_reason_in_source_refs() -> None:
    evidence = lookup_failed_evidence("timed out after 25 s", kind="timeout")
    assert evidence["source_refs"] == {"lookup_error": "timed out after 25 s"}
    assert lookup_error(evidence) == "timed out after 25 s" and lookup_error({}) == ""
