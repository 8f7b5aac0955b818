"""Project factory commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from eventsourcing.persistence import RecordConflictError

from domain.projects.events import (
    ParticipantAdded,
    ParticipantRemoved,
    RepositoryFetched,
    settings_from_request,
)
from domain.projects.project import Project, mirrored_repo_slug, slugify
from domain.projects.provisioning import MirrorPort
from domain.shared.errors import Conflict, Invalid, project_not_found, template_not_found
from domain.shared.event_store import EventStore
from domain.shared.ids import is_valid_id, project_key


class ProjectExists(Conflict):
    code = "project_exists"


class Templates(Protocol):
    """The run templates a project may name (the studio's catalog)."""

    def get(self, template_id: str) -> Any: ...


class ProjectCommands:
    """Creates and finds projects (the project factory)."""

    def __init__(
        self, store: EventStore, *, templates: Templates, clock: Callable[[], str], mirrors: MirrorPort | None = None,
    ) -> None:
        self.store = store
        self.templates = templates
        self.clock = clock
        self.mirrors = mirrors  # the repositories bindings bring (None: no vcs wired)

    def fetch_sources(self, project: Project, run_id: str) -> list[RepositoryFetched]:
        """Before run ``run_id`` starts: each binding that brings an existing repository has
        its mirror fetched from the origin again, each outcome recorded (a failed fetch too:
        the run works from what the mirror holds). Replaying the events fetches nothing."""
        if self.mirrors is None:
            return []
        fetches = []
        for binding in project.repository_bindings:
            repo_slug = mirrored_repo_slug(project.project_slug, binding)
            if not repo_slug:
                continue
            branch = str(binding.get("default_branch") or "main")
            try:
                head, status, error = self.mirrors.fetch(
                    tenant=project.tenant, repo_slug=repo_slug, default_branch=branch
                ).head_sha, "fetched", ""
            except Exception as exc:  # an unreachable origin is recorded, never blocking
                head, status, error = "", "failed", str(exc) or type(exc).__name__
            fetches.append({
                "repository_key": str(binding.get("repository_key") or ""), "run_id": run_id, "status": status,
                "head_sha": head, "error": error, "at": self.clock(),
            })
        if not fetches:
            return []
        return self.store.retrying(lambda: self._record_fetches(project.tenant, project.project_slug, fetches))

    def _record_fetches(self, tenant: str, slug: str, fetches: list[dict[str, Any]]) -> list[RepositoryFetched]:
        project = self.store.get_or_none(project_key(tenant, slug))
        for fetch in fetches:
            project.record_fetch(**fetch)
        recorded = list(project.pending_events)
        self.store.save(project)
        return recorded

    def create_project(
        self, *, tenant: str, request: dict[str, Any], created_by: str
    ) -> Project:
        """Creates a project from its create request (either casing); its slug comes from
        ``project_key`` or ``display_name``, and it records its settings by name."""
        base = str(request.get("project_key") or request.get("display_name") or "")
        slug = slugify(base)
        if not slug or not is_valid_id(slug):
            raise Invalid(
                "A project needs a project_key or display_name with letters or digits.",
                code="project_key_required",
            )
        template_id = str(request.get("template_id") or "")
        if template_id and self.templates.get(template_id) is None:
            raise template_not_found(template_id)
        if self.store.get_or_none(project_key(tenant, slug)) is not None:
            raise ProjectExists(f"A project with slug {slug!r} already exists in this tenant.")
        project = Project(
            tenant=tenant,
            project_slug=slug,
            created_by=created_by,
            created_at=self.clock(),
            **settings_from_request(request),
        )
        try:
            self.store.save(project)
        except RecordConflictError:  # a concurrent create of the same slug won the race
            raise ProjectExists(
                f"A project with slug {slug!r} already exists in this tenant."
            ) from None
        return project

    def remove_participant(
        self, *, tenant: str, project_slug: str, subject_key: str, removed_by: str
    ) -> ParticipantRemoved:
        """Records ``subject_key`` leaving the project (every access derived from it goes);
        answers the recorded event."""
        project = self.get_project(tenant, project_slug)
        if project is None:
            raise project_not_found(project_slug)
        project.remove_participant(subject_key=subject_key.lower(), removed_by=removed_by, at=self.clock())
        return self._saved(project)

    def add_participant(
        self, *, tenant: str, project_slug: str, subject_key: str, project_role: str, stack_ids: list[str],
        added_by: str,
    ) -> ParticipantAdded:
        """Records ``subject_key`` taking part at ``project_role`` (added back after a removal,
        or given another role); answers the recorded event."""
        project = self.get_project(tenant, project_slug)
        if project is None:
            raise project_not_found(project_slug)
        project.add_participant(
            subject_key=subject_key.lower(), project_role=project_role, stack_ids=list(stack_ids), added_by=added_by,
            at=self.clock(),
        )
        return self._saved(project)

    def _saved(self, project: Project) -> Any:
        """Saves ``project``; answers the one event it recorded."""
        (recorded,) = project.pending_events
        self.store.save(project)
        return recorded

    def get_project(self, tenant: str, slug: str) -> Project | None:
        if not is_valid_id(slug):
            return None
        return self.store.get_or_none(project_key(tenant, slug))
