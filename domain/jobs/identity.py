"""The IdentityLink aggregate: one subject's account at one provider, linked or not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eventsourcing.domain import event

from domain.jobs.events import IdentityLinked, IdentityRelinked, IdentityUnlinked
from domain.shared.base import Aggregate
from domain.shared.ids import derived_id


def subject_id(tenant: str, subject_key: str) -> str:
    """A subject's opaque id: derived from its (lower-cased) subject key."""
    return derived_id("sub", tenant, subject_key.lower())


def identity_key(tenant: str, provider: str, subject_key: str) -> str:
    return f"idl:{tenant}:{provider}:{subject_id(tenant, subject_key)}"


ACCOUNT_FIELDS = ("user_id", "username", "email", "provider_user_id", "provider_username")


def account_fields(account: Any) -> dict[str, object]:
    """What a link records of the provider account: the facts of a ``LinkFacts`` or the
    current state of an ``IdentityLink`` (the same names in both)."""
    fields: dict[str, object] = {name: getattr(account, name) for name in ACCOUNT_FIELDS}
    fields["attributes"] = dict(account.attributes)
    return fields


@dataclass(frozen=True)
class LinkFacts:
    """What a link says: who the subject is here, and who it is at the provider."""

    subject_key: str
    provider_user_id: str
    user_id: str = ""
    username: str = ""
    email: str = ""
    provider_username: str = ""
    attributes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, subject_key: str, account: Any) -> LinkFacts:
        """The facts an account record (access sync's, or the link endpoint's body) gives for
        ``subject_key``; a subject key that is an address stands in for a missing email."""
        return cls(
            subject_key=subject_key,
            provider_user_id=account.provider_user_id,
            user_id=account.user_id,
            username=account.username,
            email=(account.email or (subject_key if "@" in subject_key else "")).lower(),
            provider_username=account.provider_username,
            attributes=dict(account.attributes),
        )

    def fields(self) -> dict[str, object]:
        return account_fields(self)


class IdentityLink(Aggregate):
    """A subject's link to a provider account (written by access sync and the link endpoint)."""

    @staticmethod
    def create_id(tenant: str, provider: str, subject_key: str) -> str:
        return identity_key(tenant, provider, subject_key)

    @classmethod
    def link_new(cls, *, tenant: str, provider: str, facts: LinkFacts, source: str, at: str) -> IdentityLink:
        return cls(
            tenant=tenant,
            provider=provider,
            subject_id=subject_id(tenant, facts.subject_key),
            subject_key=facts.subject_key.lower(),
            source=source,
            at=at,
            **facts.fields(),  # type: ignore[arg-type]
        )

    @event(IdentityLinked)
    def __init__(
        self,
        *,
        tenant: str,
        provider: str,
        subject_id: str,
        subject_key: str,
        user_id: str,
        username: str,
        email: str,
        provider_user_id: str,
        provider_username: str,
        attributes: dict[str, str],
        source: str,
        at: str,
    ) -> None:
        self.tenant = tenant
        self.provider = provider
        self.subject_id = subject_id
        self.subject_key = subject_key
        self._take(user_id, username, email, provider_user_id, provider_username, attributes, at)

    def _take(
        self,
        user_id: str,
        username: str,
        email: str,
        provider_user_id: str,
        provider_username: str,
        attributes: dict[str, str],
        at: str,
    ) -> None:
        """The linked account's facts, as a link or a relink records them."""
        self.user_id = user_id
        self.username = username
        self.email = email
        self.provider_user_id = provider_user_id
        self.provider_username = provider_username
        self.attributes = attributes
        self.linked = True
        self.updated_at = at

    def current(self) -> dict[str, object]:
        return account_fields(self)

    def relink(self, facts: LinkFacts, *, source: str, at: str) -> bool:
        """Links again (or with new facts); answers False (records nothing) when unchanged."""
        if self.linked and self.current() == facts.fields():
            return False
        self._relinked(source=source, at=at, **facts.fields())  # type: ignore[arg-type]
        return True

    @event(IdentityRelinked)
    def _relinked(
        self,
        user_id: str,
        username: str,
        email: str,
        provider_user_id: str,
        provider_username: str,
        attributes: dict[str, str],
        source: str,
        at: str,
    ) -> None:
        self._take(user_id, username, email, provider_user_id, provider_username, attributes, at)

    def unlink(self, *, source: str, at: str) -> bool:
        """Unlinks; answers False (records nothing) when already unlinked."""
        if not self.linked:
            return False
        self._unlinked(source=source, at=at)
        return True

    @event(IdentityUnlinked)
    def _unlinked(self, source: str, at: str) -> None:
        self.linked = False
        self.updated_at = at
