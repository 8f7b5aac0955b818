"""Projects read model: the project factory's ``PortalProjectOut`` per project.

Only fields the service can fill truthfully are filled; everything else keeps its
empty-typed default (C11). Run history is attached as runs are launched and end.
"""

from __future__ import annotations

from typing import Any

from domain.projects import events as pe
from domain.projects.project import repository_bindings, source_ref, suit_tester_roles
from domain.projects.sources import redact
from domain.shared.metadata import pick
from domain.studio import events as ev
from projections.engine.docs import Docs, Handlers, Projector, handles
from projections.engine.envelope import Envelope

VCS_BASE_URL = "https://vcs.squadops.local"


def project_doc_key(tenant: str, slug: str) -> str:
    return f"project/{tenant}/{slug}"


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def project_out(tenant: str, slug: str, request: dict[str, Any], created_by: str, created_at: str) -> dict[str, Any]:
    """The project as the factory answers it, from its create request."""
    participants = []
    for p in pick(request, "participants", []) or []:
        if isinstance(p, dict) and p.get("subject_key"):
            participants.append(
                {
                    "subject_key": str(p["subject_key"]).lower(),
                    "project_role": str(p.get("project_role") or "contributor"),
                    "stack_ids": _strings(p.get("stack_ids", [])),
                }
            )
    for owner in _strings(pick(request, "owner_subject_keys", [])):
        if all(p["subject_key"] != owner.lower() for p in participants):
            participants.append({"subject_key": owner.lower(), "project_role": "owner", "stack_ids": []})
    for member in _strings(pick(request, "member_subject_keys", [])):
        if all(p["subject_key"] != member.lower() for p in participants):
            participants.append({"subject_key": member.lower(), "project_role": "contributor", "stack_ids": []})
    if created_by and all(p["subject_key"] != created_by for p in participants):
        participants.append({"subject_key": created_by, "project_role": "owner", "stack_ids": []})
    bindings = []
    for b in repository_bindings(request):
        repo_slug = str(b.get("vcs_repo_slug") or "")
        bindings.append(
            {
                "repository_key": str(b.get("repository_key") or ""),
                "display_name": str(b.get("display_name") or ""),
                "vcs_repo_slug": repo_slug,
                "vcs_repo_url": f"{VCS_BASE_URL}/{repo_slug}" if repo_slug else "",
                "default_branch": str(b.get("default_branch") or "main"),
                "workspace_scope": str(b.get("workspace_scope") or "project_shared"),
                "repository_type": str(b.get("repository_type") or "application"),
                "metadata": {
                    **{
                        k: v
                        for k, v in b.items()
                        if k in ("repository_provisioning_policy", "create_vcs_repo", "private_repo")
                    },
                    **({"source_repository_url": redact(str(b["source_repository_url"]))}
                       if b.get("source_repository_url") else {}),
                },
            }
        )
    template_id = str(pick(request, "template_id") or "delivery-core")
    assembly = dict(pick(request, "project_assembly", {}) or {})
    refs = source_ref(request)
    assembly.setdefault("source_ref_mode", refs["mode"])
    assembly.setdefault("suit_tester_roles", suit_tester_roles(request))
    main_repo = next((b for b in bindings if b["repository_type"] == "assembly"), bindings[0] if bindings else None)
    enabled = pick(request, "enabled_stack_ids")
    return {
        "tenant_id": tenant,
        "project_slug": slug,
        "is_favorite": False,
        "template_id": template_id,
        "template_family": template_id.split("-")[0],
        "display_name": str(pick(request, "display_name") or slug),
        "description": str(pick(request, "description") or ""),
        "vcs_repo_slug": main_repo["vcs_repo_slug"] if main_repo else "",
        "vcs_repo_url": main_repo["vcs_repo_url"] if main_repo else "",
        "repository_provisioning_policy": str(pick(request, "repository_provisioning_policy") or ""),
        "created_by": created_by,
        "updated_at": created_at,
        "team_group_paths": _strings(pick(request, "member_group_paths", [])),
        "member_subject_keys": sorted({p["subject_key"] for p in participants}),
        "participants": participants,
        "enabled_stack_ids": _strings(enabled) if enabled is not None else [],
        "board_project_uid": str(pick(request, "board_project_uid") or ""),
        "proof_codebase_repo_slug": next(
            (b["vcs_repo_slug"] for b in bindings if b["repository_key"] in ("backend", "frontend")), ""
        ),
        "project_assembly": assembly,
        "repository_bindings": bindings,
        "ai_config": {"template_id": template_id, "source_ref_repos": refs["repos"]},
        "ai_run_history": [],
    }


class _Provisioning(Handlers):
    """What a provisioning outcome or a participant change does to ``PortalProjectOut``, by
    the event's class: ``(project, e)``."""

    @handles(pe.RepositoryProvisioned)
    def repository_provisioned(self, project: dict[str, Any], e: pe.RepositoryProvisioned) -> None:
        """The binding's repository (URL, commit, status) and the project's summary status."""
        bindings = project["repository_bindings"]
        # Logs written before repositories had hosting URLs stored the server's own path
        # (``file://…``): it is never shown; the binding keeps its hosting URL.
        url = None if e.vcs_repo_url.startswith("file:") else e.vcs_repo_url
        for b in bindings:
            if b["repository_key"] == e.repository_key:
                b["vcs_repo_url"] = b["vcs_repo_url"] if url is None else url
                b["metadata"]["vcs_repo_provision_status"] = e.status
                b["metadata"]["vcs_repo_node_id"] = e.vcs_repo_node_id
                if e.error:
                    b["metadata"]["vcs_repo_provision_error"] = e.error
        states = [b["metadata"].get("vcs_repo_provision_status") for b in bindings]
        states = [s for s in states if s]
        failed = [
            b["metadata"].get("vcs_repo_provision_error", "")
            for b in bindings
            if b["metadata"].get("vcs_repo_provision_status") == "failed"
        ]
        project["vcs_repo_provision_status"] = "failed" if failed else ("provisioned" if states else "")
        project["vcs_repo_provision_error"] = failed[0] if failed else ""
        main = next((b for b in bindings if b["repository_type"] == "assembly"), bindings[0] if bindings else None)
        if main is not None and main["repository_key"] == e.repository_key:
            project["vcs_repo_url"] = main["vcs_repo_url"]
            project["vcs_repo_node_id"] = e.vcs_repo_node_id

    @handles(pe.RepositoryFetched)
    def repository_fetched(self, project: dict[str, Any], e: pe.RepositoryFetched) -> None:
        for b in project["repository_bindings"]:
            if b["repository_key"] == e.repository_key:
                b["metadata"]["last_fetch"] = {
                    "run_id": e.run_id, "status": e.status, "head_sha": e.head_sha, "error": e.error, "at": e.at,
                }

    @handles(pe.DsnProvisioned)
    def dsn_provisioned(self, project: dict[str, Any], e: pe.DsnProvisioned) -> None:
        """The DSN's status in the assembly's ``error_reporting`` and each lane binding's metadata."""
        project["project_assembly"]["error_reporting"] = {"status": e.status, "dsn": e.dsn, "error": e.error}
        for b in project["repository_bindings"]:
            if b["repository_key"] in ("frontend", "backend"):
                b["metadata"]["error_reporting_dsn_status"] = e.status

    @handles(pe.SurfacesRecorded)
    def surfaces_recorded(self, project: dict[str, Any], e: pe.SurfacesRecorded) -> None:
        board, design, catalog = e.board, e.design, e.catalog
        project["board_projection"] = board.get("board_projection", {"error": board.get("error", "")})
        project["board_sync_status"] = board.get("board_sync_status", "failed" if "error" in board else "")
        project["design_hub"] = design or None
        project["design_team_ref"] = str((design or {}).get("design_team_ref", ""))
        project["catalog_entity_ref"] = str(catalog.get("catalog_entity_ref", ""))
        project["catalog_annotations"] = dict(catalog.get("catalog_annotations", {}))

    @handles(pe.ParticipantAdded)
    def participant_added(self, project: dict[str, Any], e: pe.ParticipantAdded) -> None:
        added = {"subject_key": e.subject_key, "project_role": e.project_role, "stack_ids": list(e.stack_ids)}
        others = [p for p in project["participants"] if p["subject_key"] != e.subject_key]
        project["participants"] = [*others, added]
        project["member_subject_keys"] = sorted({*project["member_subject_keys"], e.subject_key})

    @handles(pe.ParticipantRemoved)
    def participant_removed(self, project: dict[str, Any], e: pe.ParticipantRemoved) -> None:
        project["participants"] = [p for p in project["participants"] if p["subject_key"] != e.subject_key]
        project["member_subject_keys"] = [k for k in project["member_subject_keys"] if k != e.subject_key]


_PROVISIONING = _Provisioning()
PROVISIONING = tuple(_Provisioning.handlers)


def apply_provisioning(project: dict[str, Any], e: Any) -> None:
    """A provisioning outcome or a participant change folded into ``PortalProjectOut`` (the
    handler of its class in ``_Provisioning``); any other event leaves it as it is."""
    change = _PROVISIONING.handler(type(e))
    if change is None:
        return
    project["updated_at"] = max(project["updated_at"], e.at)
    change(_PROVISIONING, project, e)


class ProjectsProjector(Projector):
    name = "projects"
    announced = True  # the feed's reads keep copies of project documents (api.studio.feed)
    history_limit = 20

    @handles(pe.ProjectCreated)
    def project_created(self, e: pe.ProjectCreated, env: Envelope, docs: Docs) -> None:
        tenant, slug = env.tenant, e.project_slug
        doc = project_out(tenant, slug, e.settings(), e.created_by, e.created_at)
        docs.put(project_doc_key(tenant, slug), doc, partition=f"projects/{tenant}", sort_key=slug)

    @handles(*PROVISIONING)
    def project_provisioned(self, e: Any, env: Envelope, docs: Docs) -> None:
        """A provisioning outcome or a participant change (``apply_provisioning``)."""
        slug = env.scope[2] if len(env.scope) > 2 else ""
        project = docs.get(project_doc_key(env.tenant, slug))
        if project is not None:
            apply_provisioning(project, e)
            docs.put(project_doc_key(env.tenant, slug), project, partition=f"projects/{env.tenant}", sort_key=slug)

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        tenant, run_id = env.tenant, env.run_id
        key = project_doc_key(tenant, e.project_slug)
        project = docs.get(key)
        if project is None:
            return
        docs.put(f"run-project/{tenant}/{run_id}", {"project_slug": e.project_slug}, partition="run-project")
        entry = {
            "run_id": run_id,
            "run_key": run_id,
            "template_id": e.template_id,
            "status": "ready",
            "next_goal": e.next_goal,
            "created_at": env.at,
            "updated_at": env.at,
        }
        history = [entry] + [h for h in project["ai_run_history"] if h["run_id"] != run_id]
        project["ai_run_history"] = history[: self.history_limit]
        project["updated_at"] = max(project["updated_at"], env.at)
        docs.put(key, project, partition=f"projects/{tenant}", sort_key=project["project_slug"])

    @handles(ev.RunCompleted)
    def run_completed(self, e: ev.RunCompleted, env: Envelope, docs: Docs) -> None:
        self._run_history(env, docs, "completed")

    @handles(ev.RunCleanedUp)
    def run_cleaned_up(self, e: ev.RunCleanedUp, env: Envelope, docs: Docs) -> None:
        self._run_history(env, docs, "cleaned_up")

    @staticmethod
    def _run_history(env: Envelope, docs: Docs, status: str) -> None:
        tenant, run_id = env.tenant, env.run_id
        link = docs.get(f"run-project/{tenant}/{run_id}")
        if link is None:
            return
        key = project_doc_key(tenant, link["project_slug"])
        project = docs.get(key)
        if project is None:
            return
        for entry in project["ai_run_history"]:
            if entry["run_id"] == run_id:
                entry["status"] = status
                entry["updated_at"] = env.at
        docs.put(key, project, partition=f"projects/{tenant}", sort_key=project["project_slug"])
