"""The declared event Structs of the studio, projects and portal areas match what their
aggregates record, and the projection engine decodes each stored event once into them."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import NamedTuple

import msgspec

from domain.portal import events as portal_events
from domain.portal.copilot import CopilotThread
from domain.portal.notifications import Inbox
from domain.projects import events as project_events
from domain.projects.project import Project
from domain.studio import events as studio_events
from domain.studio.lease import WorkspaceLease
from domain.studio.run import Run
from domain.studio.session import AgentSession
from projections.engine.contracts import CONTRACTS
from projections.engine.envelope import envelope

AGGREGATES = (Run, AgentSession, WorkspaceLease, Project, Inbox, CopilotThread)
LIBRARY_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}
STAMP = {"_type_": "datetime_iso", "_data_": "2026-01-02T03:04:05.000006+00:00"}


def recorded_fields() -> dict[str, set[str]]:
    recorded = {}
    for aggregate in AGGREGATES:
        for value in vars(aggregate).values():
            if isinstance(value, type) and issubclass(value, aggregate.Event) and value is not aggregate.Event:
                fields = {f.name for f in dataclasses.fields(value)} - LIBRARY_FIELDS
                if value.__name__ == "Created" and not fields:
                    continue  # the library's unused default created event
                recorded[f"{aggregate.__name__}.{value.__name__}"] = fields
    return recorded


def test_every_stored_event_has_exactly_the_fields_of_its_declared_struct() -> None:
    declared = {**studio_events.BY_KIND, **project_events.BY_KIND, **portal_events.BY_KIND}
    recorded = recorded_fields()
    assert set(recorded) == set(declared)
    for kind, fields in recorded.items():
        assert fields == set(declared[kind].__struct_fields__), kind


def test_every_declared_kind_is_in_the_engines_table() -> None:
    for table in (studio_events.BY_KIND, project_events.BY_KIND, portal_events.BY_KIND):
        assert all(CONTRACTS[kind] is struct for kind, struct in table.items())


class Note(NamedTuple):
    id: int
    originator_id: str
    originator_version: int
    topic: str
    state: bytes


def test_a_stored_event_decodes_once_into_its_struct_with_its_time() -> None:
    state = {"timestamp": STAMP, "code": "wall", "message": "m", "evidence": {"k": 1}, "at": "2026-01-02T03:04:05Z",
             "tick": 3}
    env = envelope(Note(9, "ses:t:r:s:a", 4, "domain.session:AgentSession.Blocked", msgspec.json.encode(state)))
    assert isinstance(env.event, studio_events.Blocked)
    assert (env.event.code, env.event.evidence, env.event.tick) == ("wall", {"k": 1}, 3)
    assert env.at == "2026-01-02T03:04:05.000006Z"


def test_an_older_event_without_a_later_field_reads_the_aggregates_default() -> None:
    state = {"timestamp": STAMP, "actor": "op", "control_id": "c", "previous_status": "working", "at": "x"}
    env = envelope(Note(1, "ses:t:r:s:a", 2, "domain.session:AgentSession.Paused", msgspec.json.encode(state)))
    assert isinstance(env.event, studio_events.Paused)
    assert (env.event.live_status, env.event.current_step, env.event.previous_status) == ("paused", "paused", "working")


def test_a_payload_with_nan_reads_through_the_tolerant_path() -> None:
    state = {"timestamp": STAMP, "tick": 1, "at": "x", "report": {"score": math.nan}}
    env = envelope(Note(1, "run:t:r", 2, "domain.run:Run.TickRecorded", json.dumps(state).encode()))
    assert isinstance(env.event, studio_events.TickRecorded) and math.isnan(env.event.report["score"])


def test_undeclared_kinds_and_payloads_that_do_not_fit_stay_untyped() -> None:
    unknown = envelope(Note(1, "run:t:r", 2, "x:Run.Renamed", msgspec.json.encode({"timestamp": STAMP, "a": 1})))
    assert unknown.event is None and unknown.at == "2026-01-02T03:04:05.000006Z"
    misfit = {"timestamp": STAMP, "tick": "not a number", "at": "x", "report": {}}
    env = envelope(Note(1, "run:t:r", 2, "domain.run:Run.TickRecorded", msgspec.json.encode(misfit)))
    assert env.event is None and env.at == "2026-01-02T03:04:05.000006Z"
    with_nan = json.dumps({"timestamp": STAMP, "a": math.nan}).encode()
    assert envelope(Note(1, "run:t:r", 2, "x:Run.Renamed", with_nan)).at == "2026-01-02T03:04:05.000006Z"


REQUEST = {
    "project_key": "acme",
    "display_name": "Acme",
    "repository_bindings": [{"repository_key": "assembly", "vcs_repo_slug": "acme/assembly", "repository_type": "assembly"}],
    "project_assembly": {"sourceRefRepos": [{"slug": "acme/spec", "branch": "main"}]},
    "agentSquadSuitTesterRoles": ["admin"],
    "owner_subject_keys": ["ana@example.com"],
}


def test_a_project_records_its_settings_by_name_and_an_old_raw_request_reads_the_same() -> None:
    from eventsourcing.persistence import Mapper, StoredEvent

    from domain.projects.events import settings_from_request
    from projections.projects.projects import project_out
    from workers.eventstore.transcoder import MsgspecTranscoder

    mapper = Mapper(transcoder=MsgspecTranscoder())
    project = Project(tenant="t", project_slug="acme", created_by="op", created_at="2026-01-02T03:04:05Z",
                      **settings_from_request(REQUEST))
    new = mapper.to_stored_event(project.collect_events()[0])
    stored = msgspec.json.decode(new.state)
    assert "request" not in stored and stored["class_version"] == 2
    assert stored["display_name"] == "Acme" and stored["agent_squad_suit_tester_roles"] == ["admin"]
    # The same project as today's code's predecessor stored it: the raw request.
    old_state = {k: stored[k] for k in ("timestamp", "originator_topic", "tenant", "project_slug", "created_by",
                                         "created_at")} | {"request": REQUEST}
    old = StoredEvent(new.originator_id, new.originator_version, new.topic, msgspec.json.encode(old_state))
    # The aggregate loads both alike (upcast_v1_v2) ...
    loaded = [mapper.to_domain_event(s).mutate(None) for s in (new, old)]
    assert loaded[0].request == loaded[1].request == project.request
    # ... and the engine reads both as the one contract, projecting the same project.
    envs = [envelope(Note(1, s.originator_id, 1, s.topic, s.state)) for s in (new, old)]
    assert all(isinstance(e.event, project_events.ProjectCreated) for e in envs)
    outs = [project_out("t", "acme", e.event.settings(), e.event.created_by, e.event.created_at) for e in envs]
    assert outs[0] == outs[1] and outs[0]["display_name"] == "Acme"


def test_settings_are_picked_as_every_reader_picks_them() -> None:
    from domain.projects.events import SETTINGS, settings_from_request
    from domain.shared.metadata import pick

    request = {"sourceRefRepos": ["camel"], "source_ref_repos": ["snake"], "agentSquadSuitTesterRoles": ["a"],
               "display_name": None, "displayName": "Shown", "projectRepositoryBindings": [{"repositoryKey": "x"}],
               "private_repo": False, "unrelated": 1}
    assert settings_from_request(request) == {name: pick(request, name) for name in SETTINGS}
