"""A project's page in one read: its bindings (with their provisioning and last fetch), its
participants with the role the permission graph gives each, its runs, its open pull requests
and what the caller may do there. ``project_overview(state, caller, slug)`` serves the route
and the page alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
from litestar import get
from litestar.datastructures import State
from litestar.params import PathParameter

from api.access import READ, Access, access_guard, check, guarded, project_in
from api.context import Caller, CallerDep, part, studio_reads
from api.openapi import answers
from api.project_factory.pulls import PullSummary, list_pulls
from domain.portal.relations import graph_grants
from domain.shared.access import ROLES, may_contribute, may_control
from domain.shared.errors import project_not_found
from domain.shared.ids import ID_PATTERN

Slug = Annotated[str, PathParameter(pattern=ID_PATTERN, description="project slug")]


@dataclass(frozen=True)
class _Subject:
    """A participant as the permission graph is asked about them (no groups of their own)."""

    subject_key: str
    groups: tuple[str, ...] = ()
    is_super_admin: bool = False


class ParticipantRole(msgspec.Struct, kw_only=True):
    subject_key: str
    project_role: str  # the highest role the graph gives ("" when it gives none)
    recorded_role: str  # the role the project records for them


class RunEntry(msgspec.Struct, kw_only=True):
    run_id: str
    template_id: str
    status: str
    next_goal: str
    created_at: str
    updated_at: str


class OverviewMay(msgspec.Struct, kw_only=True):
    launch: bool  # contributor or above
    comment: bool  # contributor or above
    publish: bool  # maintainer or above


class ProjectOverview(msgspec.Struct, kw_only=True):
    project: dict[str, Any]  # PortalProjectOut
    participants: list[ParticipantRole]
    runs: list[RunEntry]
    pulls: list[PullSummary]  # the open ones
    may: OverviewMay
    caller_role: str | None


def project_overview(state: State, caller: Caller, project_slug: str) -> ProjectOverview:
    check(state, caller.principal, caller.tenant, project_slug, READ)
    doc = studio_reads(state).project_doc(caller.tenant, project_slug)
    if doc is None:
        raise project_not_found(project_slug)
    grants = graph_grants(part(state, "permission_graph"), caller.tenant, project_slug)
    decide = grants.decide
    assert decide is not None  # graph grants always decide

    def role_of(subject: Any) -> str | None:
        return next((r for r in reversed(ROLES) if decide(subject, r)), None)

    participants = [
        ParticipantRole(subject_key=p["subject_key"], project_role=role_of(_Subject(p["subject_key"])) or "",
                        recorded_role=p["project_role"])
        for p in sorted(doc["participants"], key=lambda p: p["subject_key"])
    ]
    contribute = may_contribute(caller.principal, grants)
    return ProjectOverview(
        project=doc,
        participants=participants,
        runs=[msgspec.convert(h, RunEntry) for h in doc.get("ai_run_history", [])],
        pulls=list_pulls(state, caller, project_slug, open_only=True).items,
        may=OverviewMay(launch=contribute, comment=contribute, publish=may_control(caller.principal, grants)),
        caller_role=role_of(caller.principal) or ("super_admin" if caller.principal.is_super_admin else None),
    )


@get("/projects/{project_slug:str}/overview", sync_to_thread=True, guards=[access_guard],
     summary="A project's page: bindings, participants with their roles, runs, open pull requests",
     opt=guarded(Access(READ, project_in("path", "project_slug")), **answers(401, 403, 404, 422)))
def get_overview(project_slug: Slug, state: State, caller: CallerDep) -> ProjectOverview:
    return project_overview(state, caller, project_slug)
