"""Who may read and who may steer a project's runs: the one place these rules live.

Edge identity says who (a subject key and its groups); the project's participants say what.
Project roles nest (C14): ``owner`` ⊃ ``maintainer`` ⊃ ``contributor`` ⊃ ``viewer``, and
``super_admin`` reaches everything. The rules are pure: callers hand in the project's
grants as read from its read model or from the permission graph (``decide``), so the same
rule serves every endpoint, the live channel and the fleet board.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from domain.shared.errors import Forbidden

SUPER_ADMIN_GROUP = "/org/platform/roles/super_admin"
ROLES = ("viewer", "contributor", "maintainer", "owner")  # each role includes those before it
_RANK = {role: rank for rank, role in enumerate(ROLES)}
READ_ROLE = "viewer"
CONTRIBUTE_ROLE = "contributor"
CONTROL_ROLE = "maintainer"


class Subject(Protocol):
    """The caller as the edge proxy names it."""

    @property
    def subject_key(self) -> str: ...

    @property
    def is_super_admin(self) -> bool: ...


@dataclass(frozen=True)
class ProjectGrants:
    """The project roles granted on one project, by lower-cased subject key."""

    project_slug: str
    roles: Mapping[str, str]
    # When the grants come from the permission graph: its answer to "does this subject
    # hold this role here?" (domain.portal.relations.graph_grants). It outranks ``roles``.
    decide: Callable[[Subject, str], bool] | None = None

    @classmethod
    def from_participants(cls, project_slug: str, participants: Iterable[Any]) -> ProjectGrants:
        """From ``participants[]`` items (mappings or objects with ``subject_key``/``project_role``)."""
        roles: dict[str, str] = {}
        for p in participants:
            key = p.get("subject_key", "") if isinstance(p, Mapping) else getattr(p, "subject_key", "")
            role = p.get("project_role", "") if isinstance(p, Mapping) else getattr(p, "project_role", "")
            key = str(key or "").lower()
            role = str(role or READ_ROLE) if str(role or READ_ROLE) in _RANK else READ_ROLE
            if key and _RANK[role] >= _RANK.get(roles.get(key, ""), -1):
                roles[key] = role
        return cls(project_slug, roles)

    def role_of(self, subject_key: str) -> str | None:
        return self.roles.get(subject_key.lower())


def has_role(subject: Subject, grants: ProjectGrants, role: str) -> bool:
    """True when ``subject`` holds ``role`` or a role that includes it (or is super_admin)."""
    if subject.is_super_admin:
        return True
    if grants.decide is not None:
        return grants.decide(subject, role)
    held = grants.role_of(subject.subject_key)
    return held is not None and _RANK[held] >= _RANK[role]


def may_read(subject: Subject, grants: ProjectGrants) -> bool:
    """C2: any participant of the project reads it (runs, feed, fleet board, live channel)."""
    return has_role(subject, grants, READ_ROLE)


def may_contribute(subject: Subject, grants: ProjectGrants) -> bool:
    """Reviewing work with its agents (a comment on a pull request's line) needs contributor."""
    return has_role(subject, grants, CONTRIBUTE_ROLE)


def may_control(subject: Subject, grants: ProjectGrants) -> bool:
    """C2: control verbs need the project's owner or maintainer role."""
    return has_role(subject, grants, CONTROL_ROLE)


def require_read(subject: Subject, grants: ProjectGrants) -> None:
    if not may_read(subject, grants):
        raise Forbidden(f"Only a participant of project {grants.project_slug!r} may read it.", code="not_a_participant")


def require_contribute(subject: Subject, grants: ProjectGrants) -> None:
    if not may_contribute(subject, grants):
        raise Forbidden(
            "Commenting on a pull request needs super_admin or a contributor role (or above) in the project.",
            code="contribute_role_required",
        )


def require_control(subject: Subject, grants: ProjectGrants) -> None:
    if not may_control(subject, grants):
        raise Forbidden(
            "Control verbs need super_admin or the project's owner or maintainer role.",
            code="control_role_required",
        )


def role_rank(role: str | None) -> int:
    """``viewer`` 0 … ``owner`` 3; no role (or an unknown one) -1."""
    return _RANK.get(role or "", -1)


def may_manage_participant(caller_role: str | None, *, super_admin: bool, target_role: str | None) -> bool:
    """Adding, re-roling or removing a participant who holds (or is to hold) ``target_role``
    needs a role above it; an owner manages owners too (no project role ranks above theirs);
    super_admin manages everyone. (That the last owner stays is the caller's second check.)"""
    if super_admin:
        return True
    mine = role_rank(caller_role)
    return mine == _RANK["owner"] or mine > role_rank(target_role)
