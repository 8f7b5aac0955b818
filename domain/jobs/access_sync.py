"""The access sync job: connector records in, identity links and checkpoints out (as events).

Honours ``mode`` (see ``policies.sync_plan``), ``required_connectors``, ``preflight_ssot``
with ``preflight_mode`` (``strict``: any mismatch fails the job; ``best_effort``: the
connectors that fail preflight are skipped, the others synced) and ``dry_run`` (everything
is computed and reported, nothing is recorded). The connector source is only read, so a
step may be run again after a conflicting save.
"""

from __future__ import annotations

from typing import Any

from domain.jobs.checkpoint import SyncCheckpoint, checkpoint_id, checkpoint_key
from domain.jobs.identity import IdentityLink, LinkFacts, identity_key
from domain.jobs.outcomes import Done, JobContext, JobFailure
from domain.jobs.policies import (
    DEFAULT_SCOPE,
    SyncPlan,
    preflight,
    record_problem,
    subject_of,
    sync_plan,
    sync_targets,
)
from domain.jobs.ports import ConnectorError, ConnectorRecord
from domain.shared.ids import ID_PATTERN, is_valid_id
from domain.shared.loading import one_copy


def run_access_sync(job: Any, ctx: JobContext) -> Done:
    request = job.payload
    payload = request.get("payload") or {}
    scope = str(payload.get("scope") or DEFAULT_SCOPE)
    if not is_valid_id(scope):
        raise JobFailure(f"payload.scope must match {ID_PATTERN}, got {scope!r}.", retryable=False)
    try:
        return Sync(job, ctx, scope).run()
    except ConnectorError as exc:
        raise JobFailure(f"The connector source failed: {exc}", retryable=exc.transient) from None


class Sync:
    """One access sync over the connectors it targets."""

    def __init__(self, job: Any, ctx: JobContext, scope: str) -> None:
        self.job = job
        self.ctx = ctx
        self.scope = scope
        self.request = job.payload
        self.mode = str(self.request["mode"])
        self.payload = self.request.get("payload") or {}
        self.dry_run = bool(self.request.get("dry_run"))
        self.load = one_copy(ctx.load)
        self.changed: dict[str, Any] = {}
        self.source = f"access_sync:{job.job_id}"

    def get(self, aggregate_id: str) -> Any:
        """An aggregate this sync changed already, else as stored (None when absent)."""
        return self.changed.get(aggregate_id) or self.load(aggregate_id)

    def run(self) -> Done:
        connectors = self.ctx.connectors
        required = [str(c) for c in self.request.get("required_connectors") or []]
        available = connectors.connector_ids()
        missing = [c for c in required if c not in available]
        if missing:
            raise JobFailure(f"Required connectors are not in the source: {', '.join(missing)}.", retryable=False)
        facts = {c: connectors.facts(c) for c in available}
        expected = self.request.get("preflight_ssot") or {}
        check = preflight(expected, {c: facts.get(c) for c in expected}, str(self.request.get("preflight_mode") or "strict"))
        if check.mismatches and check.mode == "strict":
            raise JobFailure(
                "Preflight against preflight_ssot failed: " + "; ".join(check.mismatches),
                retryable=False,
                result={"preflight": check.as_dict()},
            )
        targets = [
            c
            for c in sync_targets(available, required, self.request.get("provider_kind"), facts)
            if c not in check.failed_connectors
        ]
        reports = [self.sync_connector(c, facts[c]) for c in targets]
        totals = {k: sum(r[k] for r in reports) for k in ("records", "rejected", "linked", "relinked", "unlinked", "unchanged")}
        result = {
            "mode": self.mode,
            "scope": self.scope,
            "dry_run": self.dry_run,
            "preflight": check.as_dict(),
            "connectors": reports,
            "totals": totals,
        }
        return Done(result, [] if self.dry_run else list(self.changed.values()))

    # -- one connector ------------------------------------------------------------------------

    def sync_connector(self, connector_id: str, facts: dict[str, str]) -> dict[str, Any]:
        tenant, now = self.job.tenant, self.ctx.now
        key = checkpoint_key(tenant, connector_id, self.scope)
        checkpoint = self.load(key)
        cursor = checkpoint.cursor_value if checkpoint is not None else ""
        before = set(checkpoint.meta.get("linked_subjects", [])) if checkpoint is not None else set()
        plan = sync_plan(self.mode, cursor, self.payload)
        read = self.ctx.connectors.read(connector_id, self.scope, plan.read_from)
        rejected = list(read.rejected)
        desired = self.desired(read.records, plan, facts.get("provider") or connector_id, rejected)
        counts = {"linked": 0, "relinked": 0, "unlinked": 0, "unchanged": 0}
        linked_now = set(before)
        for (provider, subject), record in sorted(desired.items()):
            entry = f"{provider}|{subject}"
            outcome = self.apply(provider, subject, record)
            counts[outcome] += 1
            if record.linked:
                linked_now.add(entry)
            else:
                linked_now.discard(entry)
        if plan.unlinks_missing:
            present = {f"{p}|{s}" for (p, s), r in desired.items() if r.linked}
            for entry in sorted(before - present):
                provider, _, subject = entry.partition("|")
                link = self.get(identity_key(tenant, provider, subject))
                if link is not None and link.unlink(source=self.source, at=now):
                    self.changed[link.id] = link
                    counts["unlinked"] += 1
                linked_now.discard(entry)
        new_cursor = read.cursor if plan.moves_cursor else cursor
        meta: dict[str, Any] = {
            "mode": self.mode,
            "proposal_id": self.job.proposal_id or "",
            "records_read": len(read.records),
            "rejected": len(rejected),
            "linked_subjects": sorted(linked_now),
            "synced_at": now,
        }
        if self.mode == "repository_dispatch":
            meta["dispatch"] = {
                "event_type": str(self.payload.get("event_type") or ""),
                "repository": str(self.payload.get("repository") or ""),
            }
        if checkpoint is None:
            checkpoint = SyncCheckpoint(
                tenant=tenant,
                checkpoint_id=checkpoint_id(tenant, connector_id, self.scope),
                connector_id=connector_id,
                scope=self.scope,
                cursor_value=new_cursor,
                meta=meta,
                job_id=self.job.job_id,
                at=now,
            )
            self.changed[checkpoint.id] = checkpoint
        elif checkpoint.advance(cursor_value=new_cursor, meta=meta, job_id=self.job.job_id, at=now):
            self.changed[checkpoint.id] = checkpoint
        return {
            "connector_id": connector_id,
            "scope": self.scope,
            "from_cursor": cursor,
            "to_cursor": new_cursor,
            "records": len(read.records),
            "rejected": len(rejected),
            "rejections": rejected[:20],
            **counts,
        }

    def desired(
        self, records: list[ConnectorRecord], plan: SyncPlan, default_provider: str, rejected: list[str]
    ) -> dict[tuple[str, str], ConnectorRecord]:
        """The last word of the source on each (provider, subject) the plan covers."""
        desired: dict[tuple[str, str], ConnectorRecord] = {}
        for record in records:
            problem = record_problem(record)
            provider = record.provider or default_provider
            if not problem and not is_valid_id(provider):
                problem = f"record provider {provider!r} must match {ID_PATTERN}"
            if problem:
                rejected.append(problem)
                continue
            subject = subject_of(record)
            if plan.subjects is not None and subject not in plan.subjects:
                continue
            desired[(provider, subject)] = record
        return desired

    def apply(self, provider: str, subject: str, record: ConnectorRecord) -> str:
        """Links, relinks or unlinks one subject; answers which (or ``unchanged``)."""
        tenant, now = self.job.tenant, self.ctx.now
        link = self.get(identity_key(tenant, provider, subject))
        if not record.linked:
            if link is not None and link.unlink(source=self.source, at=now):
                self.changed[link.id] = link
                return "unlinked"
            return "unchanged"
        facts = LinkFacts.of(subject, record)
        if link is None:
            link = IdentityLink.link_new(tenant=tenant, provider=provider, facts=facts, source=self.source, at=now)
            self.changed[link.id] = link
            return "linked"
        was_linked = link.linked
        if link.relink(facts, source=self.source, at=now):
            self.changed[link.id] = link
            return "relinked" if was_linked else "linked"
        return "unchanged"
