"""The ProviderBinding aggregate: the provider configuration a wizard try applied to a proposal."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import event

from domain.jobs.events import BindingApplied, BindingUpdated
from domain.shared.base import Aggregate


def binding_key(tenant: str, proposal_id: str, provider: str) -> str:
    return f"pbd:{tenant}:{proposal_id}:{provider}"


class ProviderBinding(Aggregate):
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
        self.ssot = ssot
        self.enabled = enabled
        self.updated_at = at

    def update(self, *, ssot: dict[str, Any], enabled: bool, job_id: str, at: str) -> bool:
        """Records the new settings; answers False (records nothing) when unchanged."""
        if ssot == self.ssot and enabled == self.enabled:
            return False
        self._updated(ssot=ssot, enabled=enabled, job_id=job_id, at=at)
        return True

    @event(BindingUpdated)
    def _updated(self, ssot: dict[str, Any], enabled: bool, job_id: str, at: str) -> None:
        self.ssot = ssot
        self.enabled = enabled
        self.updated_at = at
