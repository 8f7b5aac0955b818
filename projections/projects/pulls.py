"""Pull requests read model: the pull requests a project's agents opened, and their publication.

``pull/<tenant>/<project>/<number>`` in partition ``pulls/<tenant>/<project>`` (sorted by
number; the project's number, ``domain.projects.pull_numbers``, or for older events the one
``assign_number`` gives on replay) holds one pull request as an agent opened it (``AgentSession.PullRequestOpened``:
its run, agent, session, role, repository, head commit and changed paths) and every gate run
that published it (``GateThread`` runs of the run's thread for that agent: status, branch,
pull request URL, push back to the origin). ``state`` is ``published`` once a gate run
published it, else ``open``. Links (a run's project and agents, a gate run's pull request)
are documents of this model too, so a rebuild folds the same.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.gate import events as gate
from domain.studio import events as ev
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope


def pull_doc_key(tenant: str, project_slug: str, number: int) -> str:
    return f"pull/{tenant}/{project_slug}/{number}"


def pulls_partition(tenant: str, project_slug: str) -> str:
    return f"pulls/{tenant}/{project_slug}"


def pull_page_url(project_slug: str, number: int) -> str:
    return f"/projects/{project_slug}/pulls/{number}"


def session_page_url(run_id: str, agent_id: str) -> str:
    return f"/runs/{run_id}/agents/{agent_id}"


def numbers_key(tenant: str, project_slug: str) -> str:
    return f"pull-numbers/{tenant}/{project_slug}"


def assign_number(numbers: dict[str, Any], e: ev.PullRequestOpened) -> int:
    """The number of ``e``'s page in its project, given the numbers the project's pages hold
    (``{"highest": n, "taken": [...]}``, updated in place).

    A pull request the project numbered keeps its number. One recorded before projects
    numbered them (no ``project_number``) keeps the plane's number while that is free, so
    its page and the notifications already sent about it stay where they were; else (a
    repeated or missing number) it takes the next after the highest. The same log folds
    to the same numbers; the project's own numbering starts after the highest
    (``PullNumbers``), so a numbered one never meets a taken number.
    """
    taken = numbers.setdefault("taken", [])
    wanted = e.project_number or e.pr_number
    if wanted < 1 or (not e.project_number and wanted in taken):
        wanted = numbers.get("highest", 0) + 1
    if wanted not in taken:
        taken.append(wanted)
    numbers["highest"] = max(numbers.get("highest", 0), wanted)
    return wanted


def number_pull_request(tenant: str, project_slug: str, e: ev.PullRequestOpened, docs: Docs) -> int:
    """``assign_number`` over the project's numbers document in ``docs`` (each read model
    that names pull requests keeps its own, folded from the same events)."""
    key = numbers_key(tenant, project_slug)
    numbers = docs.get(key) or {"highest": 0, "taken": []}
    number = assign_number(numbers, e)
    docs.put(key, numbers, partition="pull-numbers")
    return number


def run_link_key(tenant: str, run_id: str) -> str:
    return f"pull-run/{tenant}/{run_id}"


def _gate_link(tenant: str, thread_key: str, attempt: int) -> str:
    return f"pull-gate/{tenant}/{thread_key}/{attempt}"


GATE_STEPS = (gate.RunStarted, gate.PublicationPlanned, gate.PullRequestPublished, gate.BranchPushed, gate.EvidenceRecorded,
              gate.RunCompleted, gate.RunFailed)


class PullsProjector(Projector):
    name = "pulls"
    topics = frozenset({
        "Run.Launched", "AgentSession.Opened", "AgentSession.PullRequestOpened",
        *(gate.kind_of(e) for e in GATE_STEPS),
    })

    def apply(self, env: Envelope, docs: Docs) -> None:
        e = env.event
        if isinstance(e, ev.RunLaunched):
            docs.put(run_link_key(env.tenant, env.run_id), {"project_slug": e.project_slug, "agents": {}, "pulls": {}},
                     partition="pull-runs")
        elif isinstance(e, ev.SessionOpened):
            link = docs.get(run_link_key(env.tenant, env.run_id))
            if link is not None:
                link["agents"][e.agent_id] = {"session_id": e.session_id, "role_key": e.role_key,
                                              "agent_nickname": e.agent_nickname}
                docs.put(run_link_key(env.tenant, env.run_id), link, partition="pull-runs")
        elif isinstance(e, ev.PullRequestOpened):
            self._opened(env, e, docs)
        elif isinstance(e, GATE_STEPS):
            self._gate(env, e, docs)

    def _opened(self, env: Envelope, e: ev.PullRequestOpened, docs: Docs) -> None:
        link = docs.get(run_link_key(env.tenant, env.run_id))
        if link is None:
            return
        slug = link["project_slug"]
        agent = link["agents"].get(env.agent_id, {})
        number = number_pull_request(env.tenant, slug, e, docs)
        link["pulls"][env.agent_id] = number
        docs.put(run_link_key(env.tenant, env.run_id), link, partition="pull-runs")
        doc = {
            "number": number,
            "title": e.title,
            "plane_number": e.pr_number,  # the plane's (the host's) own reference
            "project_slug": slug,
            "run_id": env.run_id,
            "agent_id": env.agent_id,
            "session_id": env.session_id,
            "role_key": agent.get("role_key", ""),
            "agent_nickname": agent.get("agent_nickname", ""),
            "repository_key": e.repository_key,
            "head_sha": e.head_sha,
            "changed_paths": list(e.changed_paths),
            "opened_at": e.at,
            "updated_at": e.at,
            "state": "open",
            "page_url": pull_page_url(slug, number),
            "session_url": session_page_url(env.run_id, env.agent_id),
            "publications": [],
        }
        docs.put(pull_doc_key(env.tenant, slug, number), doc, partition=pulls_partition(env.tenant, slug),
                 sort_key=f"{number:010d}")

    def _gate(self, env: Envelope, e: Any, docs: Docs) -> None:
        _, tenant, thread_key = env.originator_id.split(":", 2)
        link_key = _gate_link(tenant, thread_key, e.attempt)
        if isinstance(e, gate.RunStarted):
            run = docs.get(run_link_key(tenant, e.run_id))
            number = (run or {}).get("pulls", {}).get(e.agent_key)
            if number is None:
                return
            docs.put(link_key, {"project_slug": run["project_slug"], "number": number}, partition="pull-gates")
        link = docs.get(link_key)
        if link is None:
            return
        key = pull_doc_key(tenant, link["project_slug"], link["number"])
        doc = docs.get(key)
        if doc is None:
            return
        fold_publication(doc, thread_key, e)
        doc["updated_at"] = max(doc["updated_at"], e.at)
        docs.put(key, doc, partition=pulls_partition(tenant, link["project_slug"]), sort_key=f"{link['number']:010d}")


def fold_publication(doc: dict[str, Any], thread_key: str, e: Any) -> None:
    """One gate step folded into the pull request's publication of that attempt."""
    if isinstance(e, gate.RunStarted):
        doc["publications"].append({
            "thread_key": thread_key, "attempt": e.attempt, "status": "running", "actor": e.actor,
            "branch_name": "", "pr_url": "", "head_sha": "", "evidence_url": "", "evidence_path": "", "push": None, "error": "",
            "started_at": e.at,
        })
        return
    found = [p for p in doc["publications"] if p["thread_key"] == thread_key and p["attempt"] == e.attempt]
    if not found:
        return
    publication = found[0]
    if isinstance(e, gate.PublicationPlanned):
        publication["branch_name"] = e.branch_name
    elif isinstance(e, gate.PullRequestPublished):
        publication.update(pr_url=e.pr_url, head_sha=e.head_sha)
    elif isinstance(e, gate.BranchPushed):
        publication["branch_name"] = e.branch_name
        publication["push"] = {"status": e.status, "origin": e.origin, "branch": e.branch_name,
                               "head_sha": e.head_sha, "error": e.error}
    elif isinstance(e, gate.EvidenceRecorded):
        publication.update(evidence_url=e.evidence_url, evidence_path=e.artifact_path)
    elif isinstance(e, gate.RunCompleted):
        publication["status"] = e.status
        if e.status == "published":
            doc["state"] = "published"
    elif isinstance(e, gate.RunFailed):
        publication.update(status="failed", error=f"{e.step}: {e.error_message}")


class StoredNumbers:
    """``NumbersTaken`` over this read model: the highest number a project's pages hold."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def highest(self, tenant: str, project_slug: str) -> int:
        body = self.store.get(PullsProjector.name, numbers_key(tenant, project_slug))
        return int(msgspec.json.decode(body).get("highest", 0)) if body is not None else 0
