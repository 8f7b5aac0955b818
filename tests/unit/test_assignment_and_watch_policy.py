"""Process assignment parsing/resolution and the watch policy, as pure rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.studio.policies import watch
from domain.studio.squad import (
    Assignment,
    AssignmentError,
    Seat,
    later_assignments,
    names,
    parse_assignment,
    plan,
    resolve_target,
)

SEATS = [
    Seat("planner", "role_planner", True),
    Seat("curator", "role_curator", True),
    Seat("backend", "role_backend", True),
    Seat("tester-admin", "role_tester", True),
    Seat("tester-guest", "role_tester", True),
    Seat("tester-old", "role_tester", False),
]


def test_assignments_read_target_provider_model_effort_speed() -> None:
    assert parse_assignment("testers:claude-code-cli:::") == Assignment("testers", "claude-code-cli")
    assert parse_assignment("planner:codex:model-proxy codex alias:high:fast") == Assignment(
        "planner", "codex", "model-proxy codex alias", "high", "fast"
    )
    assert parse_assignment("role_backend::::fast") == Assignment("role_backend", speed="fast")


@pytest.mark.parametrize(
    "text",
    ["", ":codex", "planner", "planner::::", "a b:codex", "planner:codex:m:extreme:", "planner:codex:m:low:warp", "a:b:c:d:e:f"],
)
def test_malformed_assignments_are_refused(text: str) -> None:
    with pytest.raises(AssignmentError):
        parse_assignment(text)


def test_targets_resolve_to_live_sessions_by_agent_role_or_group() -> None:
    assert resolve_target("planner", SEATS) == ["planner"]
    assert resolve_target("role_tester", SEATS) == ["tester-admin", "tester-guest"]
    assert resolve_target("testers", SEATS) == ["tester-admin", "tester-guest"]
    with pytest.raises(AssignmentError):
        resolve_target("tester-old", SEATS)
    with pytest.raises(AssignmentError):
        resolve_target("compactor", SEATS)
    # An agent (or role) that may still join the run is a target with no session yet.
    assert resolve_target("compactor", SEATS, joinable={"compactor", "role_compactor"}) == []
    assert resolve_target("testers", [Seat("planner", "role_planner", True)]) == []
    with pytest.raises(AssignmentError):
        resolve_target("nobody", SEATS, joinable={"compactor"})


def test_later_assignments_win_for_the_same_agent() -> None:
    chosen = plan([Assignment("testers", "claude-code-cli"), Assignment("tester-guest", "codex")], SEATS)
    assert chosen["tester-admin"].provider == "claude-code-cli"
    assert chosen["tester-guest"].provider == "codex"
    assert set(chosen) == {"tester-admin", "tester-guest"}


@given(st.lists(st.sampled_from(["planner", "role_tester", "testers", "backend"]), min_size=1, max_size=6))
def test_every_planned_agent_is_live_and_named_by_its_last_assignment(targets: list[str]) -> None:
    assignments = [Assignment(t, provider=f"p{i}") for i, t in enumerate(targets)]
    chosen = plan(assignments, SEATS)
    live = {s.agent_id for s in SEATS if s.live}
    assert set(chosen) <= live
    for agent_id, assignment in chosen.items():
        last = [a for a in assignments if agent_id in resolve_target(a.target, SEATS)][-1]
        assert assignment == last


def record(target: str, control: str, **fields: str) -> dict[str, str]:
    return {"target": target, "control_id": control, "provider": "", "model": "", "effort": "", "speed": "", **fields}


def test_a_session_opened_later_takes_the_last_assignment_of_each_call_naming_it_in_order() -> None:
    records = [
        record("testers", "ctl-1", provider="codex"), record("tester-admin", "ctl-1", effort="low"),
        record("role_backend", "ctl-1", provider="claude-code-cli"), record("testers", "ctl-2", speed="fast"),
    ]
    assert later_assignments(records, "tester-admin", "role_tester") == [
        Assignment("tester-admin", effort="low"), Assignment("testers", speed="fast"),
    ]
    assert later_assignments(records, "tester-guest", "role_tester") == [
        Assignment("testers", "codex"), Assignment("testers", speed="fast"),
    ]
    assert later_assignments(records, "backend", "role_backend") == [Assignment("role_backend", "claude-code-cli")]
    assert later_assignments(records, "planner", "role_planner") == []


@given(
    st.lists(st.tuples(st.sampled_from(["planner", "role_tester", "testers", "backend", "tester-x"]),
                       st.sampled_from(["ctl-1", "ctl-2", "ctl-3"])), max_size=8),
    st.sampled_from([("tester-x", "role_tester"), ("backend", "role_backend"), ("planner", "role_planner")]),
)
def test_later_sessions_take_only_assignments_that_name_them(calls: list[tuple[str, str]], seat: tuple[str, str]) -> None:
    records = [record(target, control, provider=f"p{i}") for i, (target, control) in enumerate(calls)]
    taken = later_assignments(records, *seat)
    assert all(names(a.target, *seat) for a in taken)
    # One per call that names the agent, the last of that call, in the order of the calls' last naming.
    naming = [r for r in records if names(r["target"], *seat)]
    assert len(taken) == len({r["control_id"] for r in naming})
    for assignment in taken:
        control = next(r["control_id"] for r in records if r["provider"] == assignment.provider)
        assert assignment.provider == [r for r in naming if r["control_id"] == control][-1]["provider"]


def test_the_controller_timeout_stays_below_the_monitor_cadence() -> None:
    watch.check_bounds(watch.DEFAULT_CONTROLLER_TIMEOUT_SECONDS)
    assert watch.DEFAULT_CONTROLLER_TIMEOUT_SECONDS == 25 and watch.MONITOR_POLL_SECONDS == 30
    for bad in (0, -1, 30, 31):
        with pytest.raises(ValueError):
            watch.check_bounds(bad)


def test_context_comes_from_json_or_session_state_and_only_then_from_the_lookup() -> None:
    session_state = {"repository_bindings": [{"repository_key": "backend"}], "suits": []}
    assert watch.context_source({}, session_state) == watch.FROM_JSON  # explicit JSON wins, even empty
    assert watch.context_source(None, session_state) == watch.FROM_SESSION_STATE
    assert watch.context_source(None, {"repository_bindings": [], "suits": []}) == watch.FROM_LOOKUP
    assert watch.context_source(None, None) == watch.FROM_LOOKUP


@given(st.sampled_from([watch.TIMEOUT, watch.TRANSPORT, watch.CREDENTIAL, watch.PROXY, watch.NOT_FOUND, watch.ERROR]), st.booleans())
def test_only_strict_mode_fails_loudly_and_only_on_transport_credential_proxy(kind: str, strict: bool) -> None:
    assert watch.fails_loudly(kind, strict=strict) == (strict and kind in (watch.TRANSPORT, watch.CREDENTIAL, watch.PROXY))


def test_lookup_error_reasons_say_what_happened() -> None:
    assert "25 s" in watch.lookup_error_reason(watch.TIMEOUT, "", 25)
    assert "transport" in watch.lookup_error_reason(watch.TRANSPORT, "connection refused", 25)
