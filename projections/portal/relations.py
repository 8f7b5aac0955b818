"""The relationship-tuple read model: each project's tuples, folded from project events,
and the built-in permission graph reading it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from domain.portal.graph import RelationTuple, TupleGraph, project_ref
from domain.portal.relations import project_tuples
from domain.projects import events as pe
from domain.shared.ids import is_valid_id
from domain.shared.metadata import pick
from projections.engine.copies import NotInMemory, ReadCopies
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope
from projections.engine.store import DocStore
from projections.projects.projects import project_out

NAME = "relations"


class _Doc(msgspec.Struct):
    object: str = ""
    tuples: list[RelationTuple] = []


_decode = msgspec.json.Decoder(_Doc).decode


def relations_key(tenant: str, slug: str) -> str:
    return f"relations/{tenant}/{slug}"


def relations_partition(tenant: str) -> str:
    return f"relations/{tenant}"


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


class RelationsProjector(Projector):
    """``Project.Created`` writes the project's tuples (participants, owners, members,
    the creator as owner, member teams and group paths)."""

    name = NAME
    announced = True  # the API decides access from copies of these documents

    @handles(pe.ProjectCreated)
    def project_created(self, e: pe.ProjectCreated, env: Envelope, docs: Docs) -> None:
        tenant, slug, request = env.tenant, e.project_slug, e.settings()
        out = project_out(tenant, slug, request, e.created_by, e.created_at)
        tuples = project_tuples(
            slug,
            out["participants"],
            team_keys=_strings(pick(request, "member_team_keys", [])),
            group_paths=_strings(pick(request, "member_group_paths", [])),
            owner_group_paths=_strings(pick(request, "owner_group_paths", [])),
        )
        doc = {"object": project_ref(slug), "tuples": msgspec.to_builtins(tuples)}
        docs.put(relations_key(tenant, slug), doc, partition=relations_partition(tenant), sort_key=slug)

    @handles(pe.ParticipantAdded)
    def participant_added(self, e: pe.ParticipantAdded, env: Envelope, docs: Docs) -> None:
        self._retuple(env, docs, e.subject_key, [{"subject_key": e.subject_key, "project_role": e.project_role}])

    @handles(pe.ParticipantRemoved)
    def participant_removed(self, e: pe.ParticipantRemoved, env: Envelope, docs: Docs) -> None:
        self._retuple(env, docs, e.subject_key, [])

    @staticmethod
    def _retuple(env: Envelope, docs: Docs, subject_key: str, added: list[dict[str, str]]) -> None:
        """Every tuple naming the user goes; an added one is written anew."""
        slug = env.scope[2] if len(env.scope) > 2 else ""
        doc = docs.get(relations_key(env.tenant, slug))
        if doc is not None:
            user = f"user:{subject_key}"
            tuples = [RelationTuple(*t) for t in doc["tuples"] if t[2] != user]
            tuples += project_tuples(slug, added) if added else []
            doc["tuples"] = msgspec.to_builtins(sorted(set(tuples)))
            docs.put(relations_key(env.tenant, slug), doc, partition=relations_partition(env.tenant), sort_key=slug)


def store_graph(store: DocStore, copies: ReadCopies | None = None) -> TupleGraph:
    """The built-in ``PermissionGraph`` over the relations read model (what it reads is
    kept in ``copies``, for ``memory_graph``)."""

    def tuples_of(tenant: str, obj: str) -> list[RelationTuple]:
        kind, _, slug = obj.partition(":")
        if kind != "project" or not is_valid_id(slug):
            return []
        key = relations_key(tenant, slug)
        mark = copies.mark() if copies is not None else None
        raw = store.get(NAME, key)
        if copies is not None and raw is not None:
            copies.keep(mark, {(NAME, key): raw})
        return _decode(raw).tuples if raw is not None else []

    def objects_of(tenant: str, type_: str) -> Iterator[tuple[str, list[RelationTuple]]]:
        if type_ != "project":
            return
        after = ""
        while True:
            page = store.scan(NAME, partition=relations_partition(tenant), after=after, limit=1000)
            for row in page:
                doc = _decode(row.body)
                yield doc.object, doc.tuples
            if len(page) < 1000:
                return
            after = page[-1].sort_key

    return TupleGraph(tuples_of, objects_of)


def memory_graph(copies: ReadCopies, at_least: int) -> TupleGraph:
    """The same graph over the copies alone, current at ``at_least`` or later: no I/O; a
    project whose tuples are not in memory raises ``NotInMemory`` (ask ``store_graph``)."""

    def tuples_of(tenant: str, obj: str) -> list[RelationTuple]:
        kind, _, slug = obj.partition(":")
        if kind != "project" or not is_valid_id(slug):
            return []
        copy = copies.get(NAME, relations_key(tenant, slug), at_least)
        if copy is None:
            raise NotInMemory(obj)
        return _decode(copy.body).tuples

    def objects_of(tenant: str, type_: str) -> Iterator[tuple[str, list[RelationTuple]]]:
        raise NotInMemory(type_)

    return TupleGraph(tuples_of, objects_of)
