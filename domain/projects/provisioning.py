"""Provisioning a new project through its ports: the error-reporting DSN, then one VCS
repository per binding (with a starter environment file), each outcome recorded as an event.

Both fail open: a port that raises or answers an error is recorded (``failed`` with the
error) and creation stands. The DSN goes into the starter ``.env`` of the frontend binding
(``PUBLIC_SENTRY_DSN``) and the backend binding (``SENTRY_DSN``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from domain.projects.events import RepositoryProvisioned
from domain.projects.project import Project, repository_bindings
from domain.projects.sources import MirrorPort, Repository
from domain.shared.base import Aggregate
from domain.shared.event_store import EventStore
from domain.shared.ids import project_key

log = structlog.get_logger("squadops.provisioning")

DSN_ENV = {"frontend": "PUBLIC_SENTRY_DSN", "backend": "SENTRY_DSN"}
ENV_FILE = ".env"


class VcsPort(Protocol):
    """Creates a repository with ``default_branch`` and an initial commit of ``files``."""

    def create_repository(
        self, *, tenant: str, project_slug: str, repo_slug: str, default_branch: str, private: bool,
        files: Mapping[str, str],
    ) -> Repository: ...


class RepositoryPort(VcsPort, MirrorPort, Protocol):
    """New repositories and mirrors of existing ones: one adapter holds both."""


class DsnPort(Protocol):
    """Provisions a project's error-reporting DSN; ``""`` when none is configured."""

    def provision(self, *, tenant: str, project_slug: str) -> str: ...


class BoardPort(Protocol):
    """Projects the project onto a work board: ``{board_projection, board_sync_status}``."""

    def project(self, *, tenant: str, project_slug: str, board_project_uid: str) -> dict[str, Any]: ...


class DesignPort(Protocol):
    """The project's design hub (``design_hub``), or ``{}`` when design sync is not asked."""

    def project(self, *, tenant: str, project_slug: str, enabled: bool) -> dict[str, Any]: ...


class CatalogPort(Protocol):
    """Registers the project in a service catalog: ``{catalog_entity_ref, catalog_annotations}``."""

    def register(self, *, tenant: str, project_slug: str, repo_urls: list[str]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SurfacePorts:
    board: BoardPort
    design: DesignPort
    catalog: CatalogPort


def source_url(binding: Mapping[str, Any]) -> str:
    """The existing repository the binding brings ("" for a new one)."""
    return str(binding.get("source_repository_url") or "")


def wants_repository(request: Mapping[str, Any], binding: Mapping[str, Any]) -> bool:
    project_default = request.get("create_vcs_repo", True) is not False
    return bool(binding.get("create_vcs_repo", project_default)) and project_default


def starter_files(project_slug: str, binding: Mapping[str, Any], dsn: str) -> dict[str, str]:
    key = str(binding.get("repository_key") or "")
    files = {"README.md": f"# {project_slug} · {key or 'repository'}\n"}
    if key in DSN_ENV:
        files[ENV_FILE] = f"{DSN_ENV[key]}={dsn}\n"
    return files


class ProjectProvisioning:
    def __init__(
        self, store: EventStore, *, vcs: RepositoryPort, dsn: DsnPort, clock: Callable[[], str],
        surfaces: SurfacePorts | None = None,
    ) -> None:
        self.store, self.vcs, self.dsn, self.clock, self.surfaces = store, vcs, dsn, clock, surfaces

    def provision(self, tenant: str, project_slug: str) -> list[Aggregate.Event]:
        """Provisions and records; answers the recorded outcomes (its events)."""
        project: Project = self.store.get_or_none(project_key(tenant, project_slug))
        dsn = self._dsn(project)
        for binding in repository_bindings(project.request):
            if wants_repository(project.request, binding):
                self._repository(project, binding, dsn)
        if self.surfaces is not None:
            self._surfaces(project)
        pending = list(project.pending_events)
        self.store.save(project)
        return pending

    def _surfaces(self, project: Project) -> None:
        """Board, design and catalog through their ports; a failing port is recorded, not raised."""
        urls = [e.vcs_repo_url for e in project.pending_events
                if isinstance(e, RepositoryProvisioned) and e.vcs_repo_url]
        request, tenant, slug = project.request, project.tenant, project.project_slug
        answers: dict[str, dict[str, Any]] = {}
        calls = {
            "board": lambda: self.surfaces.board.project(
                tenant=tenant, project_slug=slug, board_project_uid=str(request.get("board_project_uid") or "")),
            "design": lambda: self.surfaces.design.project(
                tenant=tenant, project_slug=slug, enabled=bool(request.get("establish_design_sync"))),
            "catalog": lambda: self.surfaces.catalog.register(tenant=tenant, project_slug=slug, repo_urls=urls),
        }
        for name, call in calls.items():
            try:
                answers[name] = dict(call())
            except Exception as exc:
                log.warning("surface_projection_failed", surface=name, error=repr(exc))
                answers[name] = {"error": str(exc) or type(exc).__name__}
        project.record_surfaces(board=answers["board"], design=answers["design"], catalog=answers["catalog"],
                                at=self.clock())

    def _dsn(self, project: Project) -> str:
        try:
            dsn = self.dsn.provision(tenant=project.tenant, project_slug=project.project_slug)
        except Exception as exc:  # fail open: recorded, never blocking
            log.warning("dsn_provision_failed", project_slug=project.project_slug, error=repr(exc))
            project.record_dsn(status="failed", dsn="", error=str(exc) or type(exc).__name__, at=self.clock())
            return ""
        project.record_dsn(status="provisioned" if dsn else "disabled", dsn=dsn, error="", at=self.clock())
        return dsn

    def _repository(self, project: Project, binding: Mapping[str, Any], dsn: str) -> None:
        """A new repository with starter files, or the mirror of the one the binding brings."""
        key = str(binding.get("repository_key") or "")
        repo_slug = str(binding.get("vcs_repo_slug") or f"{project.project_slug}/{key or 'main'}")
        branch = str(binding.get("default_branch") or "main")
        status = "mirrored" if source_url(binding) else "provisioned"
        try:
            if source_url(binding):
                repo = self.vcs.mirror_repository(
                    tenant=project.tenant, repo_slug=repo_slug, url=source_url(binding), default_branch=branch
                )
            else:
                repo = self.vcs.create_repository(
                    tenant=project.tenant,
                    project_slug=project.project_slug,
                    repo_slug=repo_slug,
                    default_branch=branch,
                    private=binding.get("private_repo", project.request.get("private_repo", True)) is not False,
                    files=starter_files(project.project_slug, binding, dsn),
                )
        except Exception as exc:
            log.warning("vcs_provision_failed", repository_key=key, error=repr(exc))
            project.record_repository(
                repository_key=key, status="failed", vcs_repo_url="", vcs_repo_node_id="",
                error=str(exc) or type(exc).__name__, at=self.clock(),
            )
            return
        project.record_repository(
            repository_key=key, status=status, vcs_repo_url=repo.url, vcs_repo_node_id=repo.node_id,
            error="", at=self.clock(),
        )
