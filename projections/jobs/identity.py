"""Identity links read model: links by provider and subject, and subjects by their names.

- ``link/<tenant>/<provider>/<subject_id>``: the identity link state (C17) of one subject
  at one provider; an unlinked one keeps its subject fields and empties the provider's.
- ``subject/<tenant>/<subject_id>``: what is known of a subject (key, user id, username,
  e-mail), from its latest link event at any provider.
- ``by/<tenant>/<field>/<value>``: the subject named by a ``user_id``, ``username`` or
  ``email`` (the last two lower-cased), for look-ups by query. An e-mail that is a
  subject's own key stays that subject's, whoever else's link states it.
"""

from __future__ import annotations

from typing import Any

from domain.jobs import events as ev
from domain.jobs.identity import subject_id as own_subject_id
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope

LOOKUP_FIELDS = ("user_id", "username", "email")


def link_doc_key(tenant: str, provider: str, subject_id: str) -> str:
    return f"link/{tenant}/{provider}/{subject_id}"


def subject_doc_key(tenant: str, subject_id: str) -> str:
    return f"subject/{tenant}/{subject_id}"


def lookup_doc_key(tenant: str, field: str, value: str) -> str:
    return f"by/{tenant}/{field}/{value if field == 'user_id' else value.lower()}"


class IdentityLinksProjector(Projector):
    name = "identity_links"

    @handles(ev.IdentityLinked)
    def identity_linked(self, e: ev.IdentityLinked, env: Envelope, docs: Docs) -> None:
        link: dict[str, Any] = {
            "subject_id": e.subject_id,
            "subject_key": e.subject_key,
            "provider": e.provider,
            "linked": True,
            "updated_at": e.at,
        }
        self.take(link, e)
        self._store(env, docs, link, indexed=True)

    @handles(ev.IdentityRelinked)
    def identity_relinked(self, e: ev.IdentityRelinked, env: Envelope, docs: Docs) -> None:
        link = self._changed(env, docs, e.at)
        if link is not None:
            link["linked"] = True
            self.take(link, e)
            self._store(env, docs, link, indexed=True)

    @handles(ev.IdentityUnlinked)
    def identity_unlinked(self, e: ev.IdentityUnlinked, env: Envelope, docs: Docs) -> None:
        link = self._changed(env, docs, e.at)
        if link is not None:
            link.update(linked=False, provider_user_id="", provider_username="", attributes={})
            self._store(env, docs, link, indexed=False)

    @staticmethod
    def _changed(env: Envelope, docs: Docs, at: str) -> dict[str, Any] | None:
        _, tenant, provider, subject_id = env.originator_id.split(":", 3)
        link = docs.get(link_doc_key(tenant, provider, subject_id))
        if link is not None:
            link["updated_at"] = max(link["updated_at"], at)
        return link

    def _store(self, env: Envelope, docs: Docs, link: dict[str, Any], *, indexed: bool) -> None:
        _, tenant, provider, subject_id = env.originator_id.split(":", 3)
        docs.put(link_doc_key(tenant, provider, subject_id), link, partition=f"links/{tenant}/{subject_id}", sort_key=provider)
        if indexed:
            self.index_subject(tenant, link, docs)

    @staticmethod
    def take(link: dict[str, Any], event: Any) -> None:
        link.update(
            user_id=event.user_id,
            username=event.username,
            email=event.email,
            provider_user_id=event.provider_user_id,
            provider_username=event.provider_username,
            attributes=dict(event.attributes),
        )

    @staticmethod
    def index_subject(tenant: str, link: dict[str, Any], docs: Docs) -> None:
        """The subject's names as this link states them (an empty one keeps what was known)."""
        subject_id = link["subject_id"]
        key = subject_doc_key(tenant, subject_id)
        subject = docs.get(key) or {
            "subject_id": subject_id,
            "subject_key": link["subject_key"],
            "user_id": "",
            "username": "",
            "email": "",
        }
        for field in LOOKUP_FIELDS:
            value = str(link.get(field) or "")
            old = subject[field]
            if not value or value == old:
                continue
            if old:
                stale = lookup_doc_key(tenant, field, old)
                if (docs.get(stale) or {}).get("subject_id") == subject_id:
                    docs.delete(stale)
            subject[field] = value
            lookup = lookup_doc_key(tenant, field, value)
            holder = (docs.get(lookup) or {}).get("subject_id", "")
            if field == "email" and holder and holder != subject_id and holder == own_subject_id(tenant, value):
                continue  # an e-mail answers the subject whose key it is, whoever else states it
            docs.put(lookup, {"subject_id": subject_id}, partition=f"subject-names/{tenant}")
        docs.put(key, subject, partition=f"subjects/{tenant}", sort_key=subject["subject_key"])
