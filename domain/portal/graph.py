"""The permission graph: relationship tuples and the rules that walk them (C2, C14).

Edge identity says who; the graph says what. A tuple ``(object, relation, subject)``
grants ``relation`` on ``object`` to ``subject``, which is a user (``user:<key>``) or a
userset: the members of a group path (``group:<path>#member``) or of a team
(``team:<key>#member``). Who belongs to a group or team is not stored: the edge asserts
it per request, so it reaches the graph as *contextual tuples*, as OpenFGA's check
takes them. Group paths nest (a member of ``/org/eng/api`` is a member of ``/org/eng``);
a team ``k`` is the group path ``…/teams/k``. Relations nest: ``owner`` ⊃ ``maintainer``
⊃ ``contributor`` ⊃ ``viewer``, and ``super_admin`` reaches everything.

``PermissionGraph`` is the port, shaped like OpenFGA's ``Check`` and ``ListObjects``
(a store per tenant, ``user``/``relation``/``object`` strings, contextual tuples), so an
OpenFGA or SpiceDB adapter can replace ``TupleGraph``, the built-in one. Its answers
carry the path of tuples that granted access, for the explain view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import msgspec

from domain.shared.access import ROLES, SUPER_ADMIN_GROUP

RANK = {role: rank for rank, role in enumerate(ROLES)}
MEMBER = "member"
TEAM_SEGMENT = "teams"


class RelationTuple(msgspec.Struct, frozen=True, order=True, array_like=True):
    """``subject`` holds ``relation`` on ``object`` (OpenFGA's ``user``, ``relation``, ``object``)."""

    object: str
    relation: str
    subject: str


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """One edge of an explanation: a stored tuple, a contextual membership, a nested role."""

    kind: str  # "tuple" | "membership" | "implied" | "super_admin"
    object: str = ""
    relation: str = ""
    subject: str = ""


class CheckRequest(msgspec.Struct, frozen=True, kw_only=True):
    store: str  # the tenant
    user: str  # "user:<key>"
    relation: str
    object: str
    contextual_tuples: tuple[RelationTuple, ...] = ()


class CheckResponse(msgspec.Struct, frozen=True, kw_only=True):
    allowed: bool
    path: tuple[Step, ...] = ()


class ListObjectsRequest(msgspec.Struct, frozen=True, kw_only=True):
    store: str
    user: str
    relation: str
    type: str
    contextual_tuples: tuple[RelationTuple, ...] = ()


class PermissionGraph(Protocol):
    """OpenFGA's check and list-objects, the port every access decision asks."""

    def check(self, request: CheckRequest) -> CheckResponse: ...

    def list_objects(self, request: ListObjectsRequest) -> list[str]: ...


def user_ref(subject_key: str) -> str:
    return f"user:{subject_key.lower()}"


def group_ref(path: str) -> str:
    return f"group:{path.rstrip('/')}"


def team_ref(team_key: str) -> str:
    return f"team:{team_key.lower()}"


def userset(ref: str) -> str:
    return f"{ref}#{MEMBER}"


def project_ref(slug: str) -> str:
    return f"project:{slug}"


def identity_tuples(subject_key: str, groups: Iterable[str]) -> tuple[RelationTuple, ...]:
    """The edge's assertions as contextual tuples: group paths (and their ancestors),
    teams (``…/teams/<key>``) and super_admin."""
    user = user_ref(subject_key)
    found: list[RelationTuple] = []
    for path in groups:
        parts = [p for p in str(path).split("/") if p]
        for depth in range(len(parts), 0, -1):
            found.append(RelationTuple(group_ref("/" + "/".join(parts[:depth])), MEMBER, user))
        if len(parts) >= 2 and parts[-2] == TEAM_SEGMENT:
            found.append(RelationTuple(team_ref(parts[-1]), MEMBER, user))
    return tuple(dict.fromkeys(found))


def is_super_admin(user: str, contextual: Iterable[RelationTuple]) -> bool:
    return RelationTuple(group_ref(SUPER_ADMIN_GROUP), MEMBER, user) in set(contextual)


def explain(
    user: str, relation: str, obj: str, tuples: Iterable[RelationTuple], contextual: Sequence[RelationTuple] = ()
) -> CheckResponse:
    """Whether ``user`` holds ``relation`` on ``obj``, with the path that grants it.

    The strongest granting tuple wins (an owner tuple over a viewer one), then the most
    direct one (the user's own tuple over a group's).
    """
    if relation not in RANK:
        return CheckResponse(allowed=False)
    if is_super_admin(user, contextual):
        return CheckResponse(
            allowed=True,
            path=(Step(kind="super_admin", object=group_ref(SUPER_ADMIN_GROUP), relation=MEMBER, subject=user),),
        )
    memberships = {t.object: t for t in contextual if t.relation == MEMBER and t.subject == user}
    best: tuple[tuple[int, int], tuple[Step, ...]] | None = None
    for t in tuples:
        if t.object != obj or t.relation not in RANK or RANK[t.relation] < RANK[relation]:
            continue
        if t.subject == user:
            steps: tuple[Step, ...] = ()
            directness = 1
        else:
            ref, _, rel = t.subject.partition("#")
            if rel != MEMBER or ref not in memberships:
                continue
            m = memberships[ref]
            steps = (Step(kind="membership", object=m.object, relation=m.relation, subject=m.subject),)
            directness = 0
        steps = (*steps, Step(kind="tuple", object=t.object, relation=t.relation, subject=t.subject))
        if t.relation != relation:
            steps = (*steps, Step(kind="implied", object=obj, relation=relation, subject=f"{obj}#{t.relation}"))
        score = (RANK[t.relation], directness)
        if best is None or score > best[0]:
            best = (score, steps)
    return CheckResponse(allowed=best is not None, path=best[1] if best else ())


class TupleGraph:
    """The built-in graph over a tuple source (the relationship read model).

    ``tuples_of(store, object)`` answers an object's stored tuples; ``objects_of(store, type)``
    yields ``(object, tuples)`` for every object of a type.
    """

    def __init__(
        self,
        tuples_of: Callable[[str, str], list[RelationTuple]],
        objects_of: Callable[[str, str], Iterable[tuple[str, list[RelationTuple]]]],
    ) -> None:
        self._tuples_of = tuples_of
        self._objects_of = objects_of

    def check(self, request: CheckRequest) -> CheckResponse:
        if is_super_admin(request.user, request.contextual_tuples):
            return explain(request.user, request.relation, request.object, (), request.contextual_tuples)
        tuples = self._tuples_of(request.store, request.object)
        return explain(request.user, request.relation, request.object, tuples, request.contextual_tuples)

    def list_objects(self, request: ListObjectsRequest) -> list[str]:
        found = []
        for obj, tuples in self._objects_of(request.store, request.type):
            if explain(request.user, request.relation, obj, tuples, request.contextual_tuples).allowed:
                found.append(obj)
        return found
