"""The wizard try job: tries a provider configuration for a proposal, and may bind it.

The try checks ``ssot`` against what the provider's connector says of itself
(``policies.wizard_problems``): with ``strict`` a problem fails the job, otherwise problems
come back as warnings. ``apply_binding`` records the binding (a ``ProviderBinding``
event); an existing, different binding is changed per ``update_mode``: ``force`` updates,
``skip`` keeps it, ``ask`` updates only with ``confirm_update``.
"""

from __future__ import annotations

from typing import Any

from domain.jobs.binding import ProviderBinding, binding_key
from domain.jobs.outcomes import Done, JobContext, JobFailure
from domain.jobs.policies import binding_action, wizard_problems
from domain.jobs.ports import ConnectorError


def run_wizard_try(job: Any, ctx: JobContext) -> Done:
    request = job.payload
    provider = str(request["provider"])
    ssot = dict(request.get("ssot") or {})
    try:
        facts = ctx.connectors.facts(provider) if provider in ctx.connectors.connector_ids() else None
    except ConnectorError as exc:
        raise JobFailure(f"The connector source failed: {exc}", retryable=exc.transient) from None
    problems = wizard_problems(provider, ssot, facts)
    if problems and request.get("strict"):
        raise JobFailure(
            "The configuration does not hold: " + "; ".join(problems),
            retryable=False,
            result={"provider": provider, "valid": False, "problems": problems},
        )
    proposal_id = str(job.proposal_id or "")
    existing = ctx.load(binding_key(job.tenant, proposal_id, provider))
    requested_enabled = request.get("enabled")
    enabled = bool(requested_enabled) if requested_enabled is not None else (existing.enabled if existing else True)
    action = binding_action(
        exists=existing is not None,
        differs=existing is not None and existing.differs(ssot=ssot, enabled=enabled),
        apply_binding=bool(request.get("apply_binding")),
        update_mode=str(request.get("update_mode") or "ask"),
        confirm_update=bool(request.get("confirm_update")),
    )
    changed: list[Any] = []
    if action == "created":
        changed.append(
            ProviderBinding(
                tenant=job.tenant, proposal_id=proposal_id, provider=provider, ssot=ssot,
                enabled=enabled, job_id=job.job_id, at=ctx.now,
            )
        )
    elif action == "updated" and existing.update(ssot=ssot, enabled=enabled, job_id=job.job_id, at=ctx.now):
        changed.append(existing)
    bound = changed[0] if changed else existing
    result = {
        "provider": provider,
        "proposal_id": proposal_id,
        "valid": not problems,
        "problems": [],
        "warnings": problems,
        "facts": dict(facts or {}),
        "binding": {
            "action": action,
            "bound": bound is not None,
            "enabled": bound.enabled if bound is not None else enabled,
            "ssot_keys": sorted(bound.ssot) if bound is not None else sorted(ssot),
        },
    }
    return Done(result, changed)
