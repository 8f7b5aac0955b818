"""Process assignment parsing/resolution and the watch policy, as pure rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.studio.policies import watch
from domain.studio.policies.assignment import (
    Assignment,
    AssignmentError,
    Seat,
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
