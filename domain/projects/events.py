"""The projects area's event contracts: what the Project aggregate stores.

One Struct per stored kind, tagged by that kind, with exactly the fields its aggregate's
``@event`` method records (``tests/unit/test_studio_event_contracts.py`` holds the two
together). Stored events live forever: a field is only ever added with a default.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ProjectsEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="event"):
    """A fact of the projects area, as stored (the store keeps id, version and time apart)."""


class ProjectCreated(ProjectsEvent, tag="Project.Created"):
    tenant: str
    project_slug: str
    request: dict[str, Any]
    created_by: str
    created_at: str


class RepositoryProvisioned(ProjectsEvent, tag="Project.RepositoryProvisioned"):
    repository_key: str
    status: str
    vcs_repo_url: str
    vcs_repo_node_id: str
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


EVENTS: tuple[type[ProjectsEvent], ...] = (
    ProjectCreated, RepositoryProvisioned, DsnProvisioned, SurfacesRecorded, ParticipantRemoved,
)
BY_KIND: dict[str, type[ProjectsEvent]] = {str(e.__struct_config__.tag): e for e in EVENTS}
