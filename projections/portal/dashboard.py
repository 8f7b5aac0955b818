"""The portal dashboard and the dynamic dashboard graph, composed per principal from the
projects read model and the roles the permission graph grants (no section is canned:
each is computed from what the principal may read)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from domain.shared.access import ROLES

FEED = "/control-plane/studio/observability-feed"
# Where the dashboard sends a person: the pages (a project's page, the project factory's form).
PROJECT = "/projects"
FACTORY = "/portal/projects/new"
ACTIVE_RUNS = ("ready", "scheduled", "running", "blocked")


class AgendaPort(Protocol):
    """A work agenda (calendar events and tasks) for the principal."""

    def agenda(self, subject_key: str) -> dict[str, Any]: ...


class NoAgenda:
    """The built-in agenda: the spec's ``provider none``, ``status disabled``."""

    def agenda(self, subject_key: str) -> dict[str, Any]:
        return {"provider": "none", "status": "disabled", "synced_at": "", "events": [], "tasks": []}


@dataclass(frozen=True)
class Viewer:
    """The principal, with the projects it reads and its strongest role on each."""

    tenant: str
    subject_key: str
    email: str
    groups: tuple[str, ...]
    is_super_admin: bool
    projects: Sequence[Mapping[str, Any]]
    roles: Mapping[str, str] = field(default_factory=dict)  # project slug -> strongest role


def repositories(projects: Iterable[Mapping[str, Any]], include_forks: bool = True) -> list[dict[str, Any]]:
    repos = []
    for p in projects:
        for b in p.get("repository_bindings", []):
            if not include_forks and b.get("repository_type") == "fork":
                continue
            repos.append(
                {
                    "project_slug": p["project_slug"],
                    "repository_key": b.get("repository_key", ""),
                    "vcs_repo_slug": b.get("vcs_repo_slug", ""),
                    "vcs_repo_url": b.get("vcs_repo_url", ""),
                    "repository_type": b.get("repository_type", ""),
                    "status": b.get("metadata", {}).get("vcs_repo_provision_status", "not_provisioned"),
                }
            )
    return repos


def _runs(projects: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    runs = [dict(r, project_slug=p["project_slug"]) for p in projects for r in p.get("ai_run_history", [])]
    return sorted(runs, key=lambda r: (r.get("created_at", ""), r.get("run_id", "")), reverse=True)


def onboarding_checks(v: Viewer) -> list[dict[str, Any]]:
    repos = repositories(v.projects)
    dsn = [p.get("project_assembly", {}).get("error_reporting", {}).get("status") for p in v.projects]

    def check(check_id: str, title: str, ok: bool, detail: str, label: str = "", url: str = "") -> dict[str, Any]:
        return {
            "check_id": check_id, "title": title, "status": "ready" if ok else "needs_action", "detail": detail,
            "action_label": "" if ok else label, "action_url": "" if ok else url,
        }

    return [
        check("identity", "Signed in", bool(v.subject_key), f"Signed in as {v.subject_key}."),
        check("project_access", "A project to work in", bool(v.projects),
              f"{len(v.projects)} project(s) readable.", "Create a project", FACTORY),
        check("repositories", "Repositories provisioned", any(r["status"] == "provisioned" for r in repos),
              f"{sum(r['status'] == 'provisioned' for r in repos)} of {len(repos)} repositories provisioned.",
              "Open the project factory", FACTORY),
        check("error_reporting", "Error reporting wired", "provisioned" in dsn,
              f"{dsn.count('provisioned')} project(s) with an error-reporting DSN.", "Open the project factory", FACTORY),
        check("first_run", "A run launched", bool(_runs(v.projects)), f"{len(_runs(v.projects))} run(s) recorded.",
              "Open the fleet board", "/"),
    ]


def role_workbench(v: Viewer) -> list[dict[str, Any]]:
    rank = {r: i for i, r in enumerate(ROLES)}
    bench = []
    for role in reversed(ROLES):
        slugs = sorted(s for s, held in v.roles.items() if rank[held] >= rank[role])
        bench.append(
            {
                "role_key": role,
                "title": role.capitalize(),
                "enabled": bool(slugs) or v.is_super_admin,
                "summary": f"{len(slugs)} project(s) at {role} or above.",
                "status": "active" if slugs else "inactive",
                "metrics": [{"metric_key": "projects", "label": "Projects", "value": len(slugs)}],
                "primary_action": {"label": "Open", "url": f"{PROJECT}/{slugs[0]}"} if slugs else {},
                "secondary_actions": [{"label": s, "url": f"{PROJECT}/{s}"} for s in slugs[1:5]],
                "highlight": slugs[0] if slugs else "",
            }
        )
    return bench


def recent_launches(v: Viewer, limit: int = 10) -> list[dict[str, Any]]:
    return [
        {
            "label": f"{r.get('template_id', '')} · {r['project_slug']}",
            "url": f"{FEED}?project_slug={r['project_slug']}&run_id={r['run_id']}",
            "solution_id": f"project:{r['project_slug']}",
            "resource_ref": f"run:{r['run_id']}",
            "project_slug": r["project_slug"],
            "launched_at": r.get("created_at", ""),
        }
        for r in _runs(v.projects)[:limit]
    ]


def solutions(v: Viewer) -> list[dict[str, Any]]:
    return [
        {
            "solution_id": f"project:{p['project_slug']}",
            "title": p.get("display_name") or p["project_slug"],
            "url": f"{PROJECT}/{p['project_slug']}",
            "description": p.get("description", ""),
            "target_url": p.get("vcs_repo_url", ""),
            "launch_url": f"{FEED}?project_slug={p['project_slug']}",
            "visible_resource_refs": [b.get("vcs_repo_slug", "") for b in p.get("repository_bindings", [])],
            "required_roles": ["viewer"],
            "required_collections": [],
        }
        for p in v.projects
    ]


def scaffolding(v: Viewer, checks: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Scenarios, edit surfaces, flows, lanes, group clusters and guided actions."""
    rank = {r: i for i, r in enumerate(ROLES)}
    clusters: dict[str, list[str]] = {}
    for path in v.groups:
        top = "/" + "/".join([s for s in path.split("/") if s][:2])
        clusters.setdefault(top, []).append(path)
    return {
        "role_scenarios": [
            {"scenario_id": f"{slug}:{role}", "title": f"{role.capitalize()} of {slug}", "persona": role,
             "stage": "active", "status": "ready", "summary": "",
             "actions": [{"label": "Open", "url": f"{PROJECT}/{slug}", "kind": "link"}]}
            for slug, role in sorted(v.roles.items())
        ],
        "edit_surfaces": [
            {"surface_id": f"project:{slug}", "title": slug, "resource_scope": "project",
             "status": "editable" if rank[role] >= rank["maintainer"] or v.is_super_admin else "read_only",
             "detail": f"Held role: {role}.", "owner_roles": ["owner", "maintainer"],
             "action_label": "Open", "action_url": f"{PROJECT}/{slug}"}
            for slug, role in sorted(v.roles.items())
        ],
        "interaction_flows": [
            {"flow_id": f"run:{r['run_id']}", "title": f"Run {r['run_id']}", "status": r.get("status", ""),
             "summary": r.get("next_goal", ""), "participants": [], "steps": [], "actions": []}
            for r in _runs(v.projects)[:10]
        ],
        "journey_lanes": [
            {"lane_id": f"{b['project_slug']}:{b['repository_key']}", "title": b["vcs_repo_slug"] or b["repository_key"],
             "status": b["status"], "summary": b["repository_type"], "persona_targets": [], "group_targets": [],
             "actions": []}
            for b in repositories(v.projects) if b["repository_type"] != "assembly"
        ],
        "group_clusters": [
            {"cluster_id": top, "title": top, "item_count": len(paths), "paths": sorted(paths),
             "action_label": "", "action_url": ""}
            for top, paths in sorted(clusters.items())
        ],
        "guided_actions": [
            {"action_id": c["check_id"], "title": c["title"], "summary": c["detail"], "priority": 10 * (i + 1),
             "action_label": c["action_label"], "action_url": c["action_url"]}
            for i, c in enumerate(x for x in checks if x["status"] != "ready")
        ],
    }


def workspace_graph(v: Viewer, limit: int) -> dict[str, Any]:
    """The dynamic dashboard: overview counts and sections of at most ``limit`` items."""
    repos, runs = repositories(v.projects), _runs(v.projects)
    checks = onboarding_checks(v)
    ready = sum(c["status"] == "ready" for c in checks)
    overview = {
        "tenant_id": v.tenant, "subject_key": v.subject_key, "group_paths": list(v.groups),
        "accessible_solutions": len(v.projects), "project_count": len(v.projects), "repo_count": len(repos),
        "workspace_count": len({(b["project_slug"], b.get("workspace_scope", "")) for p in v.projects
                                for b in ({**x, "project_slug": p["project_slug"]} for x in p.get("repository_bindings", []))}),
        "runtime_count": sum(r.get("status") in ACTIVE_RUNS for r in runs), "dataset_count": 0,
        "proposal_count": len({p["project_assembly"].get("proposal_id") for p in v.projects
                               if p.get("project_assembly", {}).get("proposal_id")}),
        "readiness_score": round(100 * ready / len(checks)),
    }

    def section(section_id: str, title: str, empty: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {"section_id": section_id, "title": title, "summary": f"{len(items)} item(s)",
                "tone": "neutral" if items else "muted", "empty_state": empty, "items": items[:limit]}

    return {
        "overview": overview,
        "sections": [
            section("projects", "Projects", "No project readable yet.", [
                {"item_key": p["project_slug"], "title": p.get("display_name") or p["project_slug"],
                 "summary": p.get("description", ""), "status": v.roles.get(p["project_slug"], "viewer"),
                 "href": f"{PROJECT}/{p['project_slug']}", "chips": [p.get("template_id", "")],
                 "metric_label": "runs", "metric_value": len(p.get("ai_run_history", [])),
                 "actions": [{"action_id": "open", "label": "Open", "url": f"{PROJECT}/{p['project_slug']}",
                              "kind": "link", "entity_kind": "project", "entity_key": p["project_slug"]}]}
                for p in v.projects]),
            section("repositories", "Repositories", "No repository bound.", [
                {"item_key": f"{r['project_slug']}:{r['repository_key']}", "title": r["vcs_repo_slug"] or r["repository_key"],
                 "summary": r["repository_type"], "status": r["status"], "href": r["vcs_repo_url"],
                 "chips": [r["project_slug"]], "metric_label": "", "metric_value": 0, "actions": []}
                for r in repos]),
            section("runs", "Recent runs", "No run launched yet.", [
                {"item_key": r["run_id"], "title": r.get("next_goal") or r["run_id"], "summary": r["project_slug"],
                 "status": r.get("status", ""), "href": f"{FEED}?project_slug={r['project_slug']}&run_id={r['run_id']}",
                 "chips": [r.get("template_id", "")], "metric_label": "", "metric_value": 0, "actions": []}
                for r in runs]),
            section("onboarding", "Onboarding", "Nothing left to set up.", [
                {"item_key": c["check_id"], "title": c["title"], "summary": c["detail"], "status": c["status"],
                 "href": c["action_url"], "chips": [], "metric_label": "", "metric_value": 0, "actions": []}
                for c in checks]),
        ],
    }
