"""Queries behind the jobs, sync and identity reads: each served from its read model."""

from __future__ import annotations

from typing import Any

import msgspec

from api.errors import RequestInvalid
from api.jobs.auth import JobCaller
from api.jobs.dto import IdentityLinkState, JobOut, SyncCheckpoint
from domain.jobs.commands import job_not_found
from domain.jobs.identity import LinkFacts, subject_id
from domain.jobs.policies import may_act_for
from domain.shared.errors import Conflict, Forbidden, NotFound
from projections.engine.docs import decode
from projections.engine.store import DocStore
from projections.jobs.checkpoints import checkpoint_doc_key, checkpoints_partition
from projections.jobs.identity import LOOKUP_FIELDS, link_doc_key, lookup_doc_key, subject_doc_key
from projections.jobs.jobs import job_doc_key

MAX_CHECKPOINTS = 1000
_job = msgspec.json.Decoder(JobOut)
_checkpoint = msgspec.json.Decoder(SyncCheckpoint)


def subject_not_found(field: str) -> NotFound:
    return NotFound(f"No subject is known by that {field} in this tenant.", code="subject_not_found")


class JobReads:
    """Jobs, checkpoints and identity links from their read models."""

    def __init__(self, store: DocStore) -> None:
        self.store = store

    def job(self, tenant: str, job_id: str) -> JobOut:
        raw = self.store.get("jobs", job_doc_key(tenant, job_id))
        if raw is None:
            raise job_not_found(job_id)
        return _job.decode(raw)

    def checkpoints(self, tenant: str) -> list[SyncCheckpoint]:
        rows = self.store.scan("sync_checkpoints", partition=checkpoints_partition(tenant), limit=MAX_CHECKPOINTS)
        return [_checkpoint.decode(row.body) for row in rows]

    def checkpoint(self, tenant: str, connector_id: str, scope: str) -> SyncCheckpoint:
        raw = self.store.get("sync_checkpoints", checkpoint_doc_key(tenant, connector_id, scope))
        if raw is None:
            raise NotFound(
                f"No sync checkpoint for connector {connector_id!r} and scope {scope!r} in this tenant.",
                code="checkpoint_not_found",
            )
        return _checkpoint.decode(raw)

    # -- identity links (C17) --------------------------------------------------------------------

    def _doc(self, key: str) -> dict[str, Any] | None:
        raw = self.store.get("identity_links", key)
        return decode(raw) if raw is not None else None

    def _named_subject(self, tenant: str, named: dict[str, str]) -> str:
        """The one subject the query's names point at."""
        found: dict[str, str] = {}
        for field, value in named.items():
            sid = ""
            if field == "email" and self._doc(subject_doc_key(tenant, subject_id(tenant, value))):
                sid = subject_id(tenant, value)  # the subject whose key the e-mail is, before any link stating it
            if not sid:
                doc = self._doc(lookup_doc_key(tenant, field, value))
                sid = doc["subject_id"] if doc else ""
            if not sid:
                raise subject_not_found(field)
            found[field] = sid
        if len(set(found.values())) > 1:
            field = sorted(found)[-1]
            raise RequestInvalid(
                ["query", field], "user_id, username and email name different subjects", "value_error", named[field]
            )
        return next(iter(found.values()))

    def check_claims(self, tenant: str, subject_key: str, facts: LinkFacts) -> None:
        """A person links claims about themself only: the e-mail is their own subject key's
        (or none), and a user id or username another subject is known by is not theirs to take.
        (super_admin and API keys bound to the tenant record what the source of truth says.)"""
        own = subject_id(tenant, subject_key)
        if facts.email and facts.email.casefold() != subject_key.casefold():
            raise Forbidden(
                "A link states only your own e-mail; another subject's is theirs to link.", code="identity_claim_forbidden"
            )
        for field in ("user_id", "username"):
            value = getattr(facts, field)
            holder = (self._doc(lookup_doc_key(tenant, field, value)) or {}).get("subject_id", "") if value else ""
            if holder and holder != own:
                raise Conflict(f"That {field} is already linked to another subject.", code="identity_claim_taken")

    def link_state(self, tenant: str, provider: str, caller: JobCaller, named: dict[str, str]) -> IdentityLinkState:
        """The caller's (or the named subject's) link at ``provider``; ``linked: false`` with
        empty provider fields when there is none (never a 404 for a known subject)."""
        own = subject_id(tenant, caller.principal.subject_key) if caller.principal is not None else ""
        forbidden = Forbidden("Only super_admin or an API key may look up other subjects.", code="identity_read_forbidden")
        if named:
            try:
                sid = self._named_subject(tenant, named)
            except (NotFound, RequestInvalid):
                if not caller.privileged:  # others' existence is not told to non-privileged callers
                    raise forbidden from None
                raise
            if not may_act_for(own_subject=own, privileged=caller.privileged, subject=sid):
                raise forbidden
        elif caller.principal is None:
            raise RequestInvalid(
                ["query", LOOKUP_FIELDS[0]], "An API key caller names the subject by user_id, username or email", "missing"
            )
        else:
            sid = own
        subject = self._doc(subject_doc_key(tenant, sid))
        if subject is None:
            principal = caller.principal
            assert principal is not None  # a named subject was found in the index, so it has a document
            subject = {"subject_id": sid, "subject_key": principal.subject_key, "user_id": "", "username": "", "email": principal.email.lower()}
        link = self._doc(link_doc_key(tenant, provider, sid))
        if link is not None:
            return msgspec.convert(link, IdentityLinkState)
        return IdentityLinkState(
            subject_id=sid,
            subject_key=subject["subject_key"],
            user_id=subject["user_id"],
            username=subject["username"],
            email=subject["email"],
            provider=provider,
            linked=False,
            provider_user_id="",
            provider_username="",
            attributes={},
        )
