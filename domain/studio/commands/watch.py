"""What the operator projection watcher records: project context and lookup failures."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

from domain.projects.project import (
    delivery_lanes,
    repository_bindings,
    source_ref,
    suit_tester_roles,
)
from domain.shared.event_store import EventStore
from domain.studio.commands.runs import RunCommands
from domain.studio.policies.blockers import PROJECT_ASSETS_LOOKUP_FAILED, lookup_failed_evidence
from domain.studio.run import Run
from domain.studio.session import BLOCKED, PAUSED


def context_from_assets(assets: Mapping[str, Any]) -> dict[str, Any]:
    """Project context from project-assets JSON (camelCase and snake_case alike)."""
    meta = dict(assets)
    refs = source_ref(meta)
    return {
        "repository_bindings": [
            {
                "repository_key": str(b.get("repository_key", "")),
                "vcs_repo_slug": str(b.get("vcs_repo_slug", "")),
                "repository_type": str(b.get("repository_type", "")),
            }
            for b in repository_bindings(meta)
        ],
        "delivery_lanes": delivery_lanes(meta),
        "suits": suit_tester_roles(meta),
        "source_ref_repos": refs["repos"],
        "source_ref_mode": refs["mode"],
    }


def context_from_session_state(run: Run) -> dict[str, Any]:
    """Project context as the run recorded it at launch (its session state)."""
    facts = run.project_facts or {}
    refs = run.source_ref or {}
    return {
        "repository_bindings": [
            {
                "repository_key": str(b.get("repository_key", "")),
                "vcs_repo_slug": str(b.get("vcs_repo_slug", "")),
                "repository_type": str(b.get("repository_type", "")),
            }
            for b in facts.get("repository_bindings", [])
        ],
        "delivery_lanes": list(facts.get("delivery_lanes", [])),
        "suits": list(facts.get("suits", [])),
        "source_ref_repos": list(refs.get("repos", [])),
        "source_ref_mode": str(refs.get("mode", "none")),
    }


@dataclass(eq=False)
class WatchCommands:
    """What the operator projection watcher changes: agents blocked by a failed lookup."""

    store: EventStore
    runs: RunCommands
    _: KW_ONLY
    clock: Callable[[], str]

    def record_lookup_failure(
        self, *, tenant: str, run_id: str, reason: str, kind: str, at_tick: int = 0
    ) -> list[str]:
        """Blocks the agents that need project context with ``project_assets_lookup_failed``.

        The intake (coordination) agents need the context; a run without a live one blocks
        its other live agents. Paused or already blocked agents keep their state (a wall is
        never overwritten by another). Answers the agents it blocked.
        """

        def command() -> list[str]:
            run = self.runs.get_run(tenant, run_id)
            if run.ended:
                return []
            live = self.runs.live_sessions(run)
            needing = [s for s in live if s.has_group("coordination")] or live
            chosen = [s for s in needing if s.live_status not in (BLOCKED, PAUSED)]
            at = self.clock()
            for session in chosen:
                session.block(
                    code=PROJECT_ASSETS_LOOKUP_FAILED,
                    message=f"The project assets lookup failed: {reason}",
                    evidence=lookup_failed_evidence(reason, kind=kind, source="project_assets_lookup"),
                    at=at,
                    tick=at_tick or run.tick,
                )
            if chosen:
                self.store.save(*chosen)
            return [s.agent_id for s in chosen]

        return self.store.retrying(command)
