"""Lean ``@event`` methods (domain/shared/base.py) record what the library's decorator
records: the same event class, fields in the same order, the same values and bytes, the
same aggregate state, the same refusals; and replaying the stored events through the
library rebuilds the very state the lean methods built."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from eventsourcing.domain import BoundCommandMethodDecorator

from domain.shared.event_store import EventStore
from domain.studio.run import Run
from domain.studio.session import AgentSession
from tests.helpers import drive_runs
from workers.bootstrap import wire_services
from workers.eventstore.transcoder import MsgspecTranscoder

MEMORY = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": ":memory:", "ORIGINATOR_ID_TYPE": "text"}


def state(aggregate: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(aggregate).items() if k not in ("_pending_events", "_modified_on")}


def both(aggregate: Any, method: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """Triggers ``method`` the lean way on ``aggregate`` and the library's way on a copy."""
    twin = copy.deepcopy(aggregate)
    lean = getattr(type(aggregate), method)
    outcomes = []
    for target, call in (
        (aggregate, lambda: lean(aggregate, *args, **kwargs)),
        (twin, lambda: BoundCommandMethodDecorator(lean.event_decorator, twin)(*copy.deepcopy(args), **copy.deepcopy(kwargs))),
    ):
        try:
            call()
            outcomes.append(target.pending_events[-1])
        except TypeError as exc:
            outcomes.append(exc)
    return outcomes[0], outcomes[1]


def session() -> AgentSession:
    return AgentSession(
        tenant="t", run_id="r", session_id="s", agent_id="a", role_key="role_dev", alias="A", title="T",
        agent_nickname="n", template_id="tpl", agent_process_kind="k", agent_tier="t", agent_pack="p",
        execution_profile="e", workload_groups=["delivery"], subject_key="sk", user_principal_name="u",
        process={}, mission_brief="m", next_goal="g", scenario_phase="p", handoff_target="", joined_via={},
        suit={}, spec_skill_ids=[], spec_mcp_server_ids=[], pr_required=False,
    )


def test_lean_and_library_events_agree_field_for_field_and_byte_for_byte() -> None:
    agg = session()
    transcoder = MsgspecTranscoder()
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("_process_started", (), dict(llm_session_id="l", skill_ids=["s"], mcp_server_ids=[], workspace_name="w",
                                      attempt=1, at="2026-01-01T00:00:00Z", tick=1)),
        ("_tool_called", ("Read", "r"), dict(summary="s", first=True, at="x", tick=2)),
        ("_assistant_message", ("hello",), dict(at="x")),
        ("_paused", (), dict(actor="op", control_id="c", previous_status="working", at="x")),  # defaults filled
        ("_resumed", (), dict(actor="op", control_id="c", wake_target="", live_status="working",
                              current_step="s", at="x")),
        ("_blocked", (), dict(code="wall", message="m", evidence={"k": [1, {"f": 1.5}]}, at="x", tick=3)),
    ]
    for method, args, kwargs in calls:
        lean, library = both(agg, method, *args, **kwargs)
        assert type(lean) is type(library)
        mine, theirs = dict(vars(lean)), dict(vars(library))
        assert list(mine) == list(theirs)
        assert mine.pop("timestamp").tzinfo == theirs.pop("timestamp").tzinfo
        assert mine == theirs
        assert transcoder.encode(mine) == transcoder.encode(theirs)
    assert agg.live_status == "blocked" and agg.version == 1 + len(calls)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), dict(text="t")),  # missing
        ((), dict(text="t", at="x", extra=1)),  # unexpected
        (("t",), dict(text="t", at="x")),  # twice
        (("t", "x", "y"), {}),  # too many
    ],
)
def test_bad_calls_are_refused_by_both_and_change_nothing(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    agg = session()
    before = state(agg)
    lean, library = both(agg, "_assistant_message", *args, **kwargs)
    assert isinstance(lean, TypeError) and isinstance(library, TypeError)
    assert state(agg) == before and len(agg.pending_events) == 1


def test_replaying_the_stored_events_rebuilds_what_the_lean_methods_built() -> None:
    app = wire_services(EventStore(MEMORY))
    drive_runs(app, runs=3, ticks=60)
    held = app.studio.ticks.holdings.aggregates
    assert any(isinstance(a, Run) for a in held.values())
    assert any(isinstance(a, AgentSession) for a in held.values())
    for aggregate_id, aggregate in held.items():
        replayed = app.event_store.repository.get(aggregate_id)
        assert state(replayed) == state(aggregate), aggregate_id
        assert replayed.modified_on == aggregate.modified_on
