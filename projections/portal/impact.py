"""The impact read model and its query (``GET /v1/portal/impact``).

Folded from project events (assets: the repository bindings; owners: owner and
maintainer participants; required tests: the project's tester suits and its contract
lane), run events (pull requests as evidence, blockers as recent failures). A pull
request that touches only the assembly repository is orchestration output: it is never
evidence here.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.projects import events as pe
from domain.projects.project import repository_bindings, suit_tester_roles
from domain.shared.metadata import pick
from domain.studio import events as ev
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope
from projections.engine.store import DocStore
from projections.projects.projects import project_out

NAME = "impact"
_decode = msgspec.json.Decoder(dict).decode


def _pr_ref(pr: ev.PullRequestOpened) -> str:
    return f"{pr.pr_owner}/{pr.pr_repo}#{pr.pr_number}"


class ImpactProjector(Projector):
    name = NAME

    @handles(pe.ProjectCreated)
    def project_created(self, e: pe.ProjectCreated, env: Envelope, docs: Docs) -> None:
        tenant = env.tenant
        slug, request = e.project_slug, e.settings()
        out = project_out(tenant, slug, request, e.created_by, e.created_at)
        assets = [{"asset_ref": f"project:{slug}", "asset_type": "project", "display_name": out["display_name"],
                   "repository_key": ""}]
        assets += [{"asset_ref": f"repo:{b['vcs_repo_slug']}", "asset_type": b.get("repository_type", "application"),
                    "display_name": b.get("display_name") or b["vcs_repo_slug"],
                    "repository_key": b.get("repository_key", "")}
                   for b in repository_bindings(request) if b.get("vcs_repo_slug")]
        tests = [{"test_ref": f"suit:{s['suit_id']}", "reason": f"{s['role_key']} suit of the project"}
                 for s in suit_tester_roles(request)]
        if any(a["repository_key"] == "contract" for a in assets):
            tests.append({"test_ref": f"contract:{slug}", "reason": "the project has a contract lane"})
        doc = {
            "project_slug": slug,
            "proposal_id": str(pick(request, "proposal_id") or ""),
            "assets": assets,
            "owners": [{"owner_ref": f"user:{p['subject_key']}", "owner_type": "user", "relation": p["project_role"]}
                       for p in out["participants"] if p["project_role"] in ("owner", "maintainer")],
            "required_tests": tests,
        }
        docs.put(f"impact-project/{tenant}/{slug}", doc, partition=f"impact-project/{tenant}", sort_key=slug)

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        docs.put(f"impact-run/{env.tenant}/{env.run_id}", {"project_slug": e.project_slug}, partition="impact-run")

    @handles(ev.PullRequestOpened)
    def pull_request_opened(self, e: ev.PullRequestOpened, env: Envelope, docs: Docs) -> None:
        slug = self._project_of(env, docs)
        if slug is None or e.repository_key == "assembly":  # orchestration output, not implementation evidence
            return
        tenant, pos = env.tenant, f"{env.position:012d}"
        doc = {"pr_ref": _pr_ref(e), "pr_url": e.pr_url, "repository_key": e.repository_key,
               "repo": f"{e.pr_owner}/{e.pr_repo}", "run_id": env.run_id, "at": env.at}
        docs.put(f"impact-pr/{tenant}/{pos}", doc, partition=f"impact-pr/{tenant}/{slug}", sort_key=pos)

    @handles(ev.Blocked)
    def blocked(self, e: ev.Blocked, env: Envelope, docs: Docs) -> None:
        slug = self._project_of(env, docs)
        if slug is None:
            return
        tenant, pos = env.tenant, f"{env.position:012d}"
        doc = {"run_id": env.run_id, "code": e.code, "message": e.message, "at": env.at}
        docs.put(f"impact-fail/{tenant}/{pos}", doc, partition=f"impact-fail/{tenant}/{slug}", sort_key=pos)

    @staticmethod
    def _project_of(env: Envelope, docs: Docs) -> str | None:
        link = docs.get(f"impact-run/{env.tenant}/{env.run_id}")
        return None if link is None else str(link["project_slug"])


def _rows(store: DocStore, p: str, limit: int) -> list[dict[str, Any]]:
    return [_decode(r.body) for r in store.scan(NAME, partition=p, limit=limit, descending=True)]


def impact(
    store: DocStore, tenant: str, readable: set[str], *, issue_ref: str, pr_ref: str, asset_ref: str, limit: int
) -> dict[str, Any]:
    """The impact projection of the query, over the projects the caller may read."""
    projects = [_decode(r.body) for r in store.scan(NAME, partition=f"impact-project/{tenant}", limit=10_000)]
    projects = [p for p in projects if p["project_slug"] in readable]
    prs = {p["project_slug"]: _rows(store, f"impact-pr/{tenant}/{p['project_slug']}", limit) for p in projects}
    matched: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for p in projects:
        hits = []
        if pr_ref:
            hits = [pr for pr in prs[p["project_slug"]] if pr_ref in (pr["pr_ref"], pr["pr_url"])]
        assets = p["assets"]
        if pr_ref and hits:
            repos = {f"repo:{h['repo']}" for h in hits}
            assets = [a for a in assets if a["asset_ref"] in repos or a["asset_type"] == "project"]
        elif asset_ref and any(a["asset_ref"] == asset_ref for a in assets):
            assets = [a for a in assets if a["asset_ref"] == asset_ref]
            repo = asset_ref.removeprefix("repo:")
            hits = [pr for pr in prs[p["project_slug"]] if asset_ref.startswith("project:") or pr["repo"] == repo]
        elif issue_ref and p["proposal_id"] == issue_ref:
            hits = prs[p["project_slug"]]
        else:
            continue
        matched.append(({**p, "assets": assets}, hits))
    failures: list[str] = []
    for p, _ in matched:
        failures += [f"{f['at']} {f['run_id']}: {f['code']} {f['message']}".strip()
                     for f in _rows(store, f"impact-fail/{tenant}/{p['project_slug']}", limit)]
    evidence = [{"evidence_ref": h["pr_ref"], "event_type": "AgentSession.PullRequestOpened", "url": h["pr_url"],
                 "source": f"run:{h['run_id']}"} for _, hits in matched for h in hits]
    if not matched:
        action = "Nothing you may read matches this reference; check it, or ask a project owner for access."
    elif failures:
        action = f"Resolve the latest blocker first: {failures[0]}"
    elif not evidence:
        action = "No implementation evidence yet: open a pull request on a delivery lane."
    else:
        action = "Run the required tests against the evidence, then request review."
    return {
        "query": {k: v for k, v in (("issue_ref", issue_ref), ("pr_ref", pr_ref), ("asset_ref", asset_ref)) if v},
        "source_of_truth": "event_log",
        "affected_assets": [{k: a[k] for k in ("asset_ref", "asset_type", "display_name")}
                            | {"relation": "bound_to" if a["asset_type"] != "project" else "owns", "source": "project_factory"}
                            for p, _ in matched for a in p["assets"]][:limit],
        "owners": [o for p, _ in matched for o in p["owners"]][:limit],
        "required_tests": [t for p, _ in matched for t in p["required_tests"]][:limit],
        "evidence_refs": evidence[:limit],
        "recent_failures": failures[:limit],
        "recommended_next_action": action,
        "source_health": {"read_model": NAME, "projects_considered": len(projects), "projects_matched": len(matched)},
    }
