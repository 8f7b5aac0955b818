"""The projects area's event contracts: what the Project aggregate stores.

One Struct per stored kind, tagged by that kind, with exactly the fields its aggregate's
``@event`` method records (``tests/unit/test_studio_event_contracts.py`` holds the two
together). Stored events live forever: a field is only ever added with a default.

A project's created event records the create request's settings as named fields
(version 2). Version 1 stored the raw request mapping under ``request``; ``upcast_v1``
reads such an event as version 2 (the aggregate's ``upcast_v1_v2`` and the projection
engine both use it), so existing logs load and project the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from domain.shared.metadata import camel


class ProjectSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What a project is created with, by name (``None``: not given). Values are as the
    request gave them under either casing (snake_case wins), as every reader picks them."""

    tenant_id: str | None = None
    proposal_id: str | None = None
    template_id: str | None = None
    project_key: str | None = None
    display_name: str | None = None
    description: str | None = None
    project_type: str | None = None
    frontend_framework: str | None = None
    backend_framework: str | None = None
    private_repo: bool | None = None
    owner_subject_keys: list[str] | None = None
    member_subject_keys: list[str] | None = None
    member_team_keys: list[str] | None = None
    member_group_paths: list[str] | None = None
    participants: list[dict[str, Any]] | None = None
    repository_bindings: list[dict[str, Any]] | None = None
    enabled_stack_ids: list[str] | None = None
    board_project_uid: str | None = None
    repository_provisioning_policy: str | None = None
    create_vcs_repo: bool | None = None
    establish_design_sync: bool | None = None
    project_assembly: dict[str, Any] | None = None
    source_ref_repos: list[Any] | None = None
    project_repository_bindings: list[dict[str, Any]] | None = None
    agent_squad_suit_tester_roles: Any = None


SETTINGS: tuple[str, ...] = ProjectSettings.__struct_fields__


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


class ProjectsEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="event"):
    """A fact of the projects area, as stored (the store keeps id, version and time apart)."""


class ProjectCreated(ProjectSettings, ProjectsEvent, tag="Project.Created"):
    """Version 2: the settings as named fields (``ProjectSettings``)."""

    tenant: str
    project_slug: str
    created_by: str
    created_at: str

    def settings(self) -> dict[str, Any]:
        """The given settings by name (what ``Project.request`` holds)."""
        return settings_mapping(msgspec.structs.asdict(self))


class ProjectCreatedV1(ProjectsEvent, tag="Project.Created"):
    """Version 1, as still stored in older logs: the raw create request."""

    tenant: str
    project_slug: str
    request: dict[str, Any]
    created_by: str
    created_at: str

    def upcast(self) -> ProjectCreated:
        state = msgspec.structs.asdict(self)
        upcast_v1(state)
        return msgspec.convert(state, ProjectCreated, strict=False)


class RepositoryProvisioned(ProjectsEvent, tag="Project.RepositoryProvisioned"):
    repository_key: str
    status: str
    vcs_repo_url: str
    vcs_repo_node_id: str
    error: str
    at: str


class RepositoryFetched(ProjectsEvent, tag="Project.RepositoryFetched"):
    """A binding's mirror fetched from its origin again, before run ``run_id`` (or why not)."""

    repository_key: str
    run_id: str
    status: str  # "fetched" | "failed"
    head_sha: str
    error: str
    at: str


class DsnProvisioned(ProjectsEvent, tag="Project.DsnProvisioned"):
    status: str
    dsn: str
    error: str
    at: str


class SurfacesRecorded(ProjectsEvent, tag="Project.SurfacesRecorded"):
    board: dict[str, Any]
    design: dict[str, Any]
    catalog: dict[str, Any]
    at: str


class ParticipantRemoved(ProjectsEvent, tag="Project.ParticipantRemoved"):
    subject_key: str
    removed_by: str
    at: str


class ParticipantAdded(ProjectsEvent, tag="Project.ParticipantAdded"):
    """A participant added (or added back, or given another role)."""

    subject_key: str
    project_role: str
    stack_ids: list[str]
    added_by: str
    at: str


EVENTS: tuple[type[ProjectsEvent], ...] = (
    ProjectCreated, RepositoryProvisioned, RepositoryFetched, DsnProvisioned, SurfacesRecorded, ParticipantRemoved, ParticipantAdded,
)
BY_KIND: dict[str, type[ProjectsEvent]] = {str(e.__struct_config__.tag): e for e in EVENTS}
