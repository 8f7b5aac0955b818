"""The ProviderBinding aggregate: the provider configuration a wizard try applied to a proposal."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.jobs.events import BindingApplied, BindingUpdated
from domain.jobs.job_written import JobWritten


def binding_key(tenant: str, proposal_id: str, provider: str) -> str:
    return f"pbd:{tenant}:{proposal_id}:{provider}"


class ProviderBinding(JobWritten):
    """A provider bound to a proposal, with its single-source-of-truth settings."""

    @staticmethod
    def create_id(tenant: str, proposal_id: str, provider: str) -> str:
        return binding_key(tenant, proposal_id, provider)

    @event(BindingApplied)
    def __init__(
        self,
        *,
        tenant: str,
        proposal_id: str,
        provider: str,
        ssot: dict[str, Any],
        enabled: bool,
        job_id: str,
        at: str,
    ) -> None:
        self.tenant = tenant
        self.proposal_id = proposal_id
        self.provider = provider
        self._take(at, ssot=ssot, enabled=enabled)

    def update(self, *, ssot: dict[str, Any], enabled: bool, job_id: str, at: str) -> bool:
        """Records the new settings; answers False (records nothing) when unchanged."""
        return self._replace(self._updated, ssot=ssot, enabled=enabled, job_id=job_id, at=at)

    @event(BindingUpdated)
    def _updated(self, ssot: dict[str, Any], enabled: bool, job_id: str, at: str) -> None:
        self._take(at, ssot=ssot, enabled=enabled)
