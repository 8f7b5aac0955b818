"""The projects area's event contracts: what the Project aggregate stores.

Each event is declared once: the aggregate applies it by class and read models read the
same class back; ``TOPIC`` is the name the log stores it under. Stored events live
forever: a field is only ever added with a default.

A project's created event records the create request's settings as named fields
(version 2). Version 1 stored the raw request mapping under ``request``; ``upcast_v1``
reads such an event as version 2 (the library's mapper calls it as ``upcast_v1_v2``), so existing logs load and project the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from domain.shared.base import Aggregate
from domain.shared.metadata import camel


class ProjectCreated(Aggregate.Created):
    """Version 2: the create request's settings as named fields (``None``: not given).

    Values are as the request gave them under either casing (snake_case wins), as every
    reader picks them. Version 1 (older logs) stored the raw request under ``request``.
    """

    TOPIC = "domain.project:Project.Created"
    class_version = 2

    tenant: str
    project_slug: str
    created_by: str
    created_at: str
    tenant_id: str | None
    proposal_id: str | None
    template_id: str | None
    project_key: str | None
    display_name: str | None
    description: str | None
    project_type: str | None
    frontend_framework: str | None
    backend_framework: str | None
    private_repo: bool | None
    owner_subject_keys: list[str] | None
    member_subject_keys: list[str] | None
    member_team_keys: list[str] | None
    member_group_paths: list[str] | None
    participants: list[dict[str, Any]] | None
    repository_bindings: list[dict[str, Any]] | None
    enabled_stack_ids: list[str] | None
    board_project_uid: str | None
    repository_provisioning_policy: str | None
    create_vcs_repo: bool | None
    establish_design_sync: bool | None
    project_assembly: dict[str, Any] | None
    source_ref_repos: list[Any] | None
    project_repository_bindings: list[dict[str, Any]] | None
    agent_squad_suit_tester_roles: Any

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        upcast_v1(state)

    def settings(self) -> dict[str, Any]:
        """The given settings by name (what ``Project.request`` holds)."""
        return settings_mapping(vars(self))


# The settings' names, in the order the created event records them.
SETTINGS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ProjectCreated))[8:]

_NAMES = frozenset(SETTINGS)
_CAMEL = {camel(name): name for name in SETTINGS if camel(name) != name}


def settings_from_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting by name (``None`` where the request has none), from a create request
    in either casing: ``pick(request, name)`` for each, in one pass over the request."""
    settings: dict[str, Any] = dict.fromkeys(SETTINGS)
    camel_values: dict[str, Any] = {}
    for key, value in request.items():
        if value is None:
            continue
        if key in _NAMES:
            settings[key] = value
        elif key in _CAMEL:
            camel_values[_CAMEL[key]] = value
    for name, value in camel_values.items():
        if settings[name] is None:  # snake_case wins when both are set
            settings[name] = value
    return settings


def settings_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """The given settings (snake_case names, unset ones left out): what readers pick from."""
    return {name: values[name] for name in SETTINGS if values.get(name) is not None}


def upcast_v1(state: dict[str, Any]) -> None:
    """A version 1 created event's state (raw ``request``) as version 2, in place."""
    request = state.pop("request", None) or {}
    state.update(settings_from_request(request))


class RepositoryProvisioned(Aggregate.Event):
    TOPIC = "domain.project:Project.RepositoryProvisioned"
    repository_key: str
    status: str
    vcs_repo_url: str
    vcs_repo_node_id: str
    error: str
    at: str


class RepositoryFetched(Aggregate.Event):
    """A binding's mirror fetched from its origin again, before run ``run_id`` (or why not)."""

    TOPIC = "domain.project:Project.RepositoryFetched"
    repository_key: str
    run_id: str
    status: str  # "fetched" | "failed"
    head_sha: str
    error: str
    at: str


class DsnProvisioned(Aggregate.Event):
    TOPIC = "domain.project:Project.DsnProvisioned"
    status: str
    dsn: str
    error: str
    at: str


class SurfacesRecorded(Aggregate.Event):
    TOPIC = "domain.project:Project.SurfacesRecorded"
    board: dict[str, Any]
    design: dict[str, Any]
    catalog: dict[str, Any]
    at: str


class ParticipantRemoved(Aggregate.Event):
    TOPIC = "domain.project:Project.ParticipantRemoved"
    subject_key: str
    removed_by: str
    at: str


class ParticipantAdded(Aggregate.Event):
    """A participant added (or added back, or given another role)."""

    TOPIC = "domain.project:Project.ParticipantAdded"
    subject_key: str
    project_role: str
    stack_ids: list[str]
    added_by: str
    at: str


# -- PullNumbers (``pulls:<tenant>:<project_slug>``): a project's pull request numbers ---------


class PullNumbersStarted(Aggregate.Created):
    """The project's numbering starts after ``after`` (the numbers its pages already hold)."""

    TOPIC = "domain.projects.pull_numbers:PullNumbers.Started"
    tenant: str
    project_slug: str
    after: int


class PullNumberAllocated(Aggregate.Event):
    """Number ``number`` goes to the pull request agent ``agent_id`` of run ``run_id`` opens."""

    TOPIC = "domain.projects.pull_numbers:PullNumbers.Allocated"
    number: int
    run_id: str
    agent_id: str
    session_id: str
    at: str


EVENTS: tuple[type[Aggregate.Event], ...] = (
    ProjectCreated, RepositoryProvisioned, RepositoryFetched, DsnProvisioned, SurfacesRecorded, ParticipantRemoved, ParticipantAdded,
    PullNumbersStarted, PullNumberAllocated,
)
BY_KIND: dict[str, type[Aggregate.Event]] = {str(e.TOPIC).rpartition(":")[2]: e for e in EVENTS}  # type: ignore[attr-defined]
