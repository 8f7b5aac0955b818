"""Which tuples a project's facts write, and project grants answered by the graph."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from domain.portal.graph import (
    RANK,
    CheckRequest,
    PermissionGraph,
    RelationTuple,
    group_ref,
    identity_tuples,
    project_ref,
    team_ref,
    user_ref,
    userset,
)
from domain.shared.access import READ_ROLE, ProjectGrants, Subject

MEMBER_ROLE = "contributor"


def project_tuples(
    slug: str,
    participants: Iterable[Mapping[str, Any]],
    *,
    team_keys: Iterable[str] = (),
    group_paths: Iterable[str] = (),
    owner_group_paths: Iterable[str] = (),
) -> list[RelationTuple]:
    """The project's relationship tuples: one per participant at their ``project_role``
    (unknown roles read as ``viewer``), member teams and group paths as contributors,
    owner group paths as owners. Sorted and without duplicates."""
    obj = project_ref(slug)
    found: set[RelationTuple] = set()
    for p in participants:
        key = str(p.get("subject_key") or "").strip().lower()
        role = str(p.get("project_role") or READ_ROLE)
        if key:
            found.add(RelationTuple(obj, role if role in RANK else READ_ROLE, user_ref(key)))
    for team in team_keys:
        if str(team).strip():
            found.add(RelationTuple(obj, MEMBER_ROLE, userset(team_ref(str(team).strip()))))
    for path in group_paths:
        if str(path).strip("/ "):
            found.add(RelationTuple(obj, MEMBER_ROLE, userset(group_ref(str(path).strip()))))
    for path in owner_group_paths:
        if str(path).strip("/ "):
            found.add(RelationTuple(obj, "owner", userset(group_ref(str(path).strip()))))
    return sorted(found)


def subject_request(subject: Subject, tenant: str, relation: str, obj: str) -> CheckRequest:
    groups = getattr(subject, "groups", ()) or ()
    return CheckRequest(
        store=tenant,
        user=user_ref(subject.subject_key),
        relation=relation,
        object=obj,
        contextual_tuples=identity_tuples(subject.subject_key, groups),
    )


def graph_grants(graph: PermissionGraph, tenant: str, project_slug: str) -> ProjectGrants:
    """``ProjectGrants`` whose every answer is the graph's check on ``project:<slug>``."""

    def decide(subject: Subject, role: str) -> bool:
        return graph.check(subject_request(subject, tenant, role, project_ref(project_slug))).allowed

    return ProjectGrants(project_slug, {}, decide)
