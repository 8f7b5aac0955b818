"""The operator projection watcher (``squadops worker watcher``).

Every monitor cadence (30 s) it looks at each running run as an operator would: the
project context, and every blocked agent with its wall and recommended verb. Context
comes from explicit project-assets JSON (``--project-assets``) or from the run's session
state; only when neither has it does it make the one project-assets lookup, bounded by
``--controller-timeout-seconds``. A slow or failed lookup blocks the agents that need the
context with ``project_assets_lookup_failed`` (``source_refs.lookup_error`` has the
reason). With strict observation, transport, credential and proxy failures raise.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import structlog

from domain.projects.project import ProjectCommands, slugify
from domain.shared.errors import DomainError
from domain.shared.metadata import pick
from domain.shared.ports import ProjectAssets, ProjectAssetsError
from domain.studio.commands import StudioCommands
from domain.studio.commands.watch import (
    context_from_assets,
    context_from_session_state,
)
from domain.studio.policies import watch
from domain.studio.policies.walls import wall_for
from projections.engine.store import DocStore
from projections.engine.unavailable import unavailable
from workers.passes import PassThread
from workers.ticker import queue_entries

log = structlog.get_logger("squadops.watcher")
T = TypeVar("T")


class ObservationFailed(RuntimeError):
    """Strict observation: a transport, credential or proxy failure, raised loudly."""


class OperatorView(msgspec.Struct, kw_only=True):
    """One run as the operator projection sees it."""

    tenant: str
    run_id: str
    project_slug: str
    context_source: str
    context: dict[str, Any]
    lookup_error: str = ""
    newly_blocked: list[str] = []
    walls: list[dict[str, str]] = []


def bounded(call: Callable[[], T], timeout_seconds: float) -> T:
    """``call()`` with a real deadline: raises TimeoutError when it has not answered in time.

    The call runs on a daemon thread, so a hung controller never holds up the watcher or
    the process's exit.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="controller-call", daemon=True).start()
    if not done.wait(timeout_seconds):
        raise TimeoutError(f"no answer within {timeout_seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class EventStoreProjectAssets:
    """Built-in project-assets adapter: the assets the project's own events recorded."""

    def __init__(self, projects: ProjectCommands) -> None:
        self.projects = projects

    def fetch(self, tenant: str, project_slug: str) -> dict[str, Any]:
        try:
            project = self.projects.get_project(tenant, project_slug)
        except DomainError as exc:
            raise ProjectAssetsError(watch.ERROR, exc.message) from None
        if project is None:
            raise ProjectAssetsError(watch.NOT_FOUND, f"no project {project_slug!r} in tenant {tenant!r}")
        return dict(project.request)


def load_project_assets(path: str | Path) -> dict[str, dict[str, Any]]:
    """Explicit project-assets JSON: ``{"projects": {slug: assets}}`` or one project's assets
    naming its ``project_slug`` (``projectSlug``). Answers slug -> assets."""
    raw = json.loads(Path(path).read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: project assets must be a JSON object")
    projects = raw.get("projects")
    if isinstance(projects, dict):
        return {str(slug): dict(assets) for slug, assets in projects.items() if isinstance(assets, dict)}
    slug = str(pick(raw, "project_slug") or slugify(str(pick(raw, "project_key") or "")))
    if not slug:
        raise ValueError(f"{path}: one project's assets must name project_slug")
    return {slug: raw}


class Watcher(PassThread):
    """Watches running runs; one pass per ``interval_seconds`` on its own thread."""

    thread_name, event, stops_on = "watcher", "watch", (ObservationFailed,)

    def __init__(
        self,
        studio: StudioCommands,
        store: DocStore,
        assets: ProjectAssets,
        *,
        timeout_seconds: float = watch.DEFAULT_CONTROLLER_TIMEOUT_SECONDS,
        interval_seconds: float = watch.MONITOR_POLL_SECONDS,
        strict: bool = False,
        explicit_assets: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        watch.check_bounds(timeout_seconds, interval_seconds)
        self.studio = studio
        self.store = store
        self.assets = assets
        self.timeout_seconds = timeout_seconds
        self.interval_seconds = interval_seconds
        self.strict = strict
        self.explicit = dict(explicit_assets) if explicit_assets is not None else None
        self.lookups = 0
        super().__init__()
        self.join_seconds = timeout_seconds + 5

    # -- one pass -----------------------------------------------------------------------

    def watch_once(self) -> list[OperatorView]:
        views = []
        for entry in queue_entries(self.store):
            if entry.status == "running":
                views.append(self.observe(entry.tenant, entry.run_id))
        return views

    def observe(self, tenant: str, run_id: str) -> OperatorView:
        run = self.studio.runs.get_run(tenant, run_id)
        explicit = self.explicit.get(run.project_slug) if self.explicit is not None else None
        session_context = context_from_session_state(run)
        source = watch.context_source(explicit, session_context)
        error, blocked = "", []
        if source == watch.FROM_JSON:
            context = context_from_assets(explicit or {})
        elif source == watch.FROM_SESSION_STATE:
            context = session_context
        else:
            context, error, kind = self._lookup(tenant, run.project_slug)
            if error:
                blocked = self.studio.watch.record_lookup_failure(
                    tenant=tenant, run_id=run_id, reason=error, kind=kind
                )
                log.warning("project_assets_lookup_failed", run_id=run_id, reason=error, blocked=blocked)
        walls = [
            {"agent_id": s.agent_id, **dataclasses.asdict(wall_for(s.blocker_code))}
            for s in self.studio.runs.live_sessions(self.studio.runs.get_run(tenant, run_id))
            if s.blocker_code
        ]
        return OperatorView(
            tenant=tenant,
            run_id=run_id,
            project_slug=run.project_slug,
            context_source=source,
            context=context,
            lookup_error=error,
            newly_blocked=blocked,
            walls=walls,
        )

    def _lookup(self, tenant: str, project_slug: str) -> tuple[dict[str, Any], str, str]:
        """(context, lookup_error, failure kind): the one bounded project-assets call."""
        self.lookups += 1
        try:
            assets = bounded(lambda: self.assets.fetch(tenant, project_slug), self.timeout_seconds)
            return context_from_assets(assets), "", ""
        except TimeoutError:
            kind, detail = watch.TIMEOUT, ""
        except ProjectAssetsError as exc:
            kind, detail = exc.kind, exc.detail
        except Exception as exc:
            if unavailable(exc) is not None:
                raise  # our own database, not the project's assets: the pass is retried
            kind, detail = watch.ERROR, repr(exc)
        if watch.fails_loudly(kind, strict=self.strict):
            raise ObservationFailed(f"project assets lookup for {project_slug!r} failed ({kind}): {detail}")
        return {}, watch.lookup_error_reason(kind, detail, self.timeout_seconds), kind

    # -- worker -------------------------------------------------------------------------

    def run_once(self) -> list[OperatorView]:
        return self.watch_once()

    def pause(self, result: Any, started: float) -> float:
        return self.interval_seconds

    def retry_in(self, failures: int) -> float:
        return self.interval_seconds


def views_json(views: list[OperatorView]) -> str:
    return msgspec.json.encode(views).decode()
