"""A project of the project factory: the ``Project`` aggregate, the facts a run takes from
it, and ``ProjectCommands`` (creating and finding projects, their participants, and the
fetch of their mirrors before a run)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol

from eventsourcing.domain import event
from eventsourcing.persistence import RecordConflictError

from domain.projects.events import (
    DsnProvisioned,
    ParticipantAdded,
    ParticipantRemoved,
    ProjectCreated,
    RepositoryFetched,
    RepositoryProvisioned,
    SurfacesRecorded,
    settings_from_request,
    settings_mapping,
)
from domain.projects.sources import MirrorPort
from domain.shared.base import Aggregate, stored_topic
from domain.shared.errors import Conflict, Invalid, project_not_found, template_not_found
from domain.shared.event_store import EventStore
from domain.shared.ids import is_valid_id, project_key
from domain.shared.metadata import normalise_keys, pick

LANE_KEYS = ("backend", "frontend", "contract")
ASSEMBLY_TYPES = frozenset({"assembly"})
_SLUG_STRIP = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    return _SLUG_STRIP.sub("-", text.lower()).strip("-")[:63].strip("-")


class Project(Aggregate):
    """A project created through the project factory."""

    @staticmethod
    def create_id(tenant: str, project_slug: str) -> str:
        return project_key(tenant, project_slug)

    @event(ProjectCreated)
    def __init__(
        self,
        *,
        tenant: str,
        project_slug: str,
        created_by: str,
        created_at: str,
        tenant_id: str | None,
        proposal_id: str | None,
        template_id: str | None,
        project_key: str | None,
        display_name: str | None,
        description: str | None,
        project_type: str | None,
        frontend_framework: str | None,
        backend_framework: str | None,
        private_repo: bool | None,
        owner_subject_keys: list[str] | None,
        member_subject_keys: list[str] | None,
        member_team_keys: list[str] | None,
        member_group_paths: list[str] | None,
        participants: list[dict[str, Any]] | None,
        repository_bindings: list[dict[str, Any]] | None,
        enabled_stack_ids: list[str] | None,
        board_project_uid: str | None,
        repository_provisioning_policy: str | None,
        create_vcs_repo: bool | None,
        establish_design_sync: bool | None,
        project_assembly: dict[str, Any] | None,
        source_ref_repos: list[Any] | None,
        project_repository_bindings: list[dict[str, Any]] | None,
        agent_squad_suit_tester_roles: Any,
    ) -> None:
        self.tenant = tenant
        self.project_slug = project_slug
        # The settings it was created with, by name (unset ones left out): what readers pick.
        self.request = settings_mapping(locals())
        self.created_by = created_by
        self.created_at = created_at
        self.updated_at = created_at

    # -- provisioning (domain.projects.provisioning records what the ports answered) -----

    @event(RepositoryProvisioned)
    def record_repository(
        self, *, repository_key: str, status: str, vcs_repo_url: str, vcs_repo_node_id: str, error: str, at: str
    ) -> None:
        self.updated_at = max(self.updated_at, at)

    @event(RepositoryFetched)
    def record_fetch(self, *, repository_key: str, run_id: str, status: str, head_sha: str, error: str, at: str) -> None:
        self.updated_at = max(self.updated_at, at)

    @event(DsnProvisioned)
    def record_dsn(self, *, status: str, dsn: str, error: str, at: str) -> None:
        self.updated_at = max(self.updated_at, at)

    @event(SurfacesRecorded)
    def record_surfaces(
        self, *, board: dict[str, Any], design: dict[str, Any], catalog: dict[str, Any], at: str
    ) -> None:
        self.updated_at = max(self.updated_at, at)

    @event(ParticipantAdded)
    def add_participant(
        self, *, subject_key: str, project_role: str, stack_ids: list[str], added_by: str, at: str
    ) -> None:
        self.updated_at = max(self.updated_at, at)

    @event(ParticipantRemoved)
    def remove_participant(self, *, subject_key: str, removed_by: str, at: str) -> None:
        self.updated_at = max(self.updated_at, at)

    # -- facts for runs ------------------------------------------------------------------

    @property
    def repository_bindings(self) -> list[dict[str, Any]]:
        return repository_bindings(self.request)

    @property
    def assembly(self) -> dict[str, Any]:
        return pick(self.request, "project_assembly", {}) or {}

    def run_facts(self) -> dict[str, Any]:
        return run_facts(self.request, self.project_slug)


def repository_bindings(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """Bindings from ``repository_bindings`` or ``projectRepositoryBindings`` alike."""
    raw = pick(meta, "repository_bindings") or pick(meta, "project_repository_bindings") or []
    assembly = pick(meta, "project_assembly", {}) or {}
    raw = raw or pick(assembly, "repository_bindings") or pick(assembly, "project_repository_bindings") or []
    return [normalise_keys(b) for b in raw if isinstance(b, dict)]


def delivery_lanes(meta: dict[str, Any]) -> list[str]:
    """Writable delivery lanes: bindings keyed backend/frontend/contract (never assembly)."""
    lanes = []
    for binding in repository_bindings(meta):
        key = str(binding.get("repository_key", ""))
        if binding.get("repository_type") in ASSEMBLY_TYPES or key == "assembly":
            continue
        if key in LANE_KEYS and key not in lanes:
            lanes.append(key)
    return lanes


def suit_tester_roles(meta: dict[str, Any]) -> list[dict[str, str]]:
    """The project's reusable actor suits (``agentSquadSuitTesterRoles``), normalised.

    Accepts a list of suit ids, a list of ``{suit_id|actor_suit_id, role_key, title}``
    objects, or a mapping suit id -> role key.
    """
    assembly = pick(meta, "project_assembly", {}) or {}
    raw = pick(meta, "agent_squad_suit_tester_roles")
    if raw is None:
        raw = pick(assembly, "agent_squad_suit_tester_roles", [])
    suits: list[dict[str, str]] = []
    if isinstance(raw, dict):
        items: list[Any] = [{"suit_id": k, "role_key": v} for k, v in raw.items()]
    elif isinstance(raw, list):
        items = raw
    else:
        items = []
    for item in items:
        if isinstance(item, str):
            suit = {"suit_id": item, "role_key": "role_tester", "title": item}
        elif isinstance(item, dict):
            suit_id = str(pick(item, "suit_id") or pick(item, "actor_suit_id") or "")
            role = pick(item, "role_key")
            suit = {
                "suit_id": suit_id,
                "role_key": role if isinstance(role, str) and role else "role_tester",
                "title": str(pick(item, "title") or suit_id),
            }
        else:
            continue
        clean = slugify(suit["suit_id"])
        if clean and all(s["suit_id"] != clean for s in suits):
            suit["suit_id"] = clean
            suits.append(suit)
    return suits


def source_ref(meta: dict[str, Any]) -> dict[str, Any]:
    """Source reference mode by priority oci > github_array > bundle > none.

    ``github_array`` and ``oci`` are shared to the HUD automatically at run creation.
    """
    assembly = pick(meta, "project_assembly", {}) or {}
    repos_raw = pick(meta, "source_ref_repos")
    if repos_raw is None:
        repos_raw = pick(assembly, "source_ref_repos", [])
    repos = []
    for repo in repos_raw or []:
        if isinstance(repo, str):
            repos.append({"slug": repo, "branch": "", "default_branch": "main"})
        elif isinstance(repo, dict):
            slug = str(pick(repo, "slug") or pick(repo, "vcs_repo_slug") or pick(repo, "repo") or "")
            if slug:
                default_branch = str(pick(repo, "default_branch") or "main")
                repos.append(
                    {
                        "slug": slug,
                        "branch": str(pick(repo, "branch") or default_branch),
                        "default_branch": default_branch,
                    }
                )
    oci = pick(meta, "source_ref_oci")
    if oci is None:
        oci = pick(assembly, "source_ref_oci")
    bundle = pick(meta, "source_ref_bundle")
    if bundle is None:
        bundle = pick(assembly, "source_ref_bundle")
    oci_version = ""
    if isinstance(oci, dict) and (pick(oci, "artifact") or pick(oci, "version")):
        mode = "oci"
        oci_version = str(pick(oci, "version") or "")
    elif repos:
        mode = "github_array"
    elif isinstance(bundle, str) and bundle.strip():
        mode = "bundle"
    else:
        mode = "none"
    return {
        "repos": repos,
        "mode": mode,
        "oci_version": oci_version,
        "hud_shared": mode in ("oci", "github_array"),
    }


def run_facts(meta: dict[str, Any], project_slug: str = "") -> dict[str, Any]:
    """What a run records from its project at launch, so its events are self-contained."""
    return {
        "delivery_lanes": delivery_lanes(meta),
        "suits": suit_tester_roles(meta),
        "repository_bindings": [binding_facts(b, project_slug) for b in repository_bindings(meta)],
        "proposal_id": str(pick(meta, "proposal_id") or ""),
    }


def mirrored_repo_slug(project_slug: str, binding: dict[str, Any]) -> str:
    """The repository of a binding that brings an existing one (its mirror), else ""."""
    if not binding.get("source_repository_url"):
        return ""
    return str(binding.get("vcs_repo_slug") or f"{project_slug}/{binding.get('repository_key') or 'main'}")


def binding_facts(b: dict[str, Any], project_slug: str) -> dict[str, Any]:
    """A binding as a run records it; one that brings an existing repository says so
    (``source: mirror``) and names its mirror, where its lanes work and the gate publishes."""
    facts = {
        "repository_key": str(b.get("repository_key", "")),
        "vcs_repo_slug": str(b.get("vcs_repo_slug", "")),
        "default_branch": str(b.get("default_branch", "main") or "main"),
        "repository_type": str(b.get("repository_type", "")),
    }
    mirror = mirrored_repo_slug(project_slug, b)
    if mirror:
        facts.update(vcs_repo_slug=mirror, source="mirror")
    return facts



# -- the commands ------------------------------------------------------------------------


class ProjectExists(Conflict):
    code = "project_exists"


class Templates(Protocol):
    """The run templates a project may name (the studio's catalog)."""

    def get(self, template_id: str) -> Any: ...


@dataclass(eq=False)
class ProjectCommands:
    """Creates and finds projects (the project factory)."""

    store: EventStore
    _: KW_ONLY
    templates: Templates
    clock: Callable[[], str]
    mirrors: MirrorPort | None = None  # the repositories bindings bring (None: no vcs wired)

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


stored_topic(Project, "domain.project:Project")  # its module has moved since the log began
