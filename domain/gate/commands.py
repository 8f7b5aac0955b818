"""Gate commands: run a thread (publish its proposal as a pull request with evidence).

Each step's effect on the vcs is followed at once by its event, so the thread's log says
how far a run got; a replay folds the events and never writes to the vcs again. Pull
requests, comments and check runs are authored by the gate's application identity,
never by the person who asked for the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import msgspec

from domain.gate.policies import (
    CHECK_NAMES,
    artifact_paths,
    branch_name,
    choose_binding,
    evidence_check,
    evidence_pack,
    evidence_scope,
    evidence_summary,
    labels,
    pr_text,
    promotion,
    publication_mode,
    run_check,
    scope_check,
    summary_comment,
)
from domain.gate.ports import ProposalRuns, Vcs, VcsError
from domain.gate.record import answer
from domain.gate.scenarios import ScenarioCatalog
from domain.gate.thread import GateThread, own_run_id, thread_key_id
from domain.projects.project import ProjectCommands
from domain.shared.errors import Unavailable
from domain.shared.event_store import EventStore
from domain.shared.ids import run_key, session_key
from domain.shared.ports import BranchChanges, WorkBranches
from domain.studio.squad import TemplateCatalog


@dataclass(frozen=True)
class GateRequest:
    tenant: str
    thread_key: str
    actor: str
    agent_key: str = ""
    provider_key: str = ""
    scenario_key: str = ""
    notes: str = ""
    publish: bool = True
    dry_run: bool = False


@dataclass
class Target:
    """Where a thread's proposal goes, and what the gate knows of its studio run."""

    run_id: str
    repo: str
    repository_key: str = ""
    repository_type: str = ""
    default_branch: str = "main"
    project_slug: str = ""
    proposal_id: str = ""
    pr_submission_policy: str = ""
    pr_submission_pipeline: str = ""
    pr_submitters: list[str] = field(default_factory=list)
    studio_run: dict[str, Any] | None = None
    source: BranchChanges | None = None  # the agent's branch whose changes the publication carries


@dataclass(eq=False)
class GateCommands:
    """Runs gate threads through the vcs port."""

    store: EventStore
    projects: ProjectCommands
    _: KW_ONLY
    vcs: Vcs
    proposals: ProposalRuns
    templates: TemplateCatalog
    scenarios: ScenarioCatalog
    app_identity: str
    default_repo: str
    clock: Callable[[], str]
    branches: WorkBranches | None = None  # the execution plane's agent branches

    # -- where a thread publishes -----------------------------------------------------------------

    def target(self, tenant: str, thread_key: str, agent_key: str) -> Target:
        """The thread's studio run (named by its run id, or by its proposal id) and its
        repository; a thread that names no known proposal runs against the default repo (C18)."""
        run = self.store.get_or_none(run_key(tenant, thread_key))
        if run is None:
            run_id = self.proposals.latest_run(tenant, thread_key)
            run = self.store.get_or_none(run_key(tenant, run_id)) if run_id else None
        if run is None:
            return Target(run_id=own_run_id(tenant, thread_key), repo=self.default_repo)
        bindings = list((run.project_facts or {}).get("repository_bindings") or [])
        if not bindings:
            project = self.projects.get_project(tenant, run.project_slug)
            bindings = project.repository_bindings if project is not None else []
        binding = choose_binding(bindings, agent_key) or {}
        template = self.templates.get(run.template_id)
        return Target(
            run_id=run.run_id,
            repo=str(binding.get("vcs_repo_slug") or self.default_repo),
            repository_key=str(binding.get("repository_key") or ""),
            repository_type=str(binding.get("repository_type") or ""),
            default_branch=str(binding.get("default_branch") or "main"),
            project_slug=run.project_slug,
            proposal_id=str((run.proposal or {}).get("proposal_id") or ""),
            pr_submission_policy=template.pr_submission_policy if template else "",
            pr_submission_pipeline=template.pr_submission_pipeline if template else "",
            pr_submitters=list(template.pr_submitter_agent_ids) if template else [],
            studio_run=self._studio_run(run),
            source=self._source(run, agent_key),
        )

    def _source(self, run: Any, agent_key: str) -> BranchChanges | None:
        """The agent's branch, when it changed something: the publication carries its changes."""
        if self.branches is None or agent_key not in run.sessions:
            return None
        changes = self.branches.changes(run, agent_key)
        return changes if changes is not None and changes.paths else None

    def _studio_run(self, run: Any) -> dict[str, Any]:
        sessions = []
        for agent_id, session_id in sorted(run.sessions.items()):
            session = self.store.get_or_none(session_key(run.tenant, run.run_id, session_id, agent_id))
            if session is not None:
                sessions.append(
                    {
                        "agent_id": agent_id,
                        "role_key": session.role_key,
                        "live_status": session.live_status,
                        "tool_call_count": session.tool_call_count,
                    }
                )
        return {"run_id": run.run_id, "status": run.status, "template_id": run.template_id, "sessions": sessions}

    # -- a run ------------------------------------------------------------------------------------

    def _apply(self, tenant: str, thread_key: str, change: Callable[[GateThread], Any]) -> Any:
        """Loads the thread afresh, applies ``change`` and saves (again after a concurrent write)."""

        def command() -> Any:
            thread = self.store.get_or_none(thread_key_id(tenant, thread_key))
            if thread is None:
                thread = GateThread(tenant=tenant, thread_key=thread_key, at=self.clock())
            outcome = change(thread)
            self.store.save(thread)
            return thread, outcome

        return self.store.retrying(command)

    def run_thread(self, request: GateRequest) -> dict[str, Any]:
        """Runs the thread once; answers the gate run record."""
        scenario = self.scenarios.require(request.scenario_key) if request.scenario_key else None
        tenant, key = request.tenant, request.thread_key
        target = self.target(tenant, key, request.agent_key)
        actor_agent = request.agent_key or target.repository_key
        _, attempt = self._apply(
            tenant,
            key,
            lambda t: t.start_run(
                run_id=target.run_id, project_slug=target.project_slug, repo=target.repo,
                repository_key=target.repository_key, repository_type=target.repository_type,
                agent_key=request.agent_key, engine_key=request.provider_key or "squadops-gate",
                runner_kind=self.vcs.kind, scenario_key=request.scenario_key,
                proposal_id=target.proposal_id, proposal_key=target.proposal_id, notes=request.notes,
                publish=request.publish, dry_run=request.dry_run, actor=request.actor,
                transport_actor=self.app_identity, pr_submission_policy=target.pr_submission_policy,
                pr_submission_pipeline=target.pr_submission_pipeline,
                pr_submission_actor_agent_key=actor_agent if actor_agent in target.pr_submitters else "",
                at=self.clock(),
            ),
        )
        facts: dict[str, Any] = {
            "thread_key": key,
            "attempt": attempt,
            "run_id": target.run_id,
            "proposal_id": target.proposal_id,
            "project_slug": target.project_slug,
            "repo": target.repo,
            "repository_key": target.repository_key,
            "agent_key": request.agent_key,
            "engine_key": request.provider_key or "squadops-gate",
            "scenario_key": request.scenario_key,
            "scenario": msgspec.to_builtins(scenario) if scenario is not None else None,
            "studio_run": target.studio_run,
            "notes": request.notes,
            "transport_actor": self.app_identity,
        }
        run = Publication(self, request, target, attempt, facts)
        try:
            return run.publish()
        except VcsError as exc:
            error = str(exc)
            self._apply(tenant, key, lambda t: t.fail(attempt=attempt, step=run.step, error_message=error, at=self.clock()))
            raise Unavailable(f"The vcs failed at step {run.step}: {error}", code="vcs_unavailable") from None


class Publication:
    """The steps of one gate run after its start."""

    def __init__(self, gate: GateCommands, request: GateRequest, target: Target, attempt: int, facts: dict[str, Any]) -> None:
        self.gate = gate
        self.request = request
        self.target = target
        self.attempt = attempt
        self.facts = facts
        self.step = "plan"
        self.scope = evidence_scope(target.repository_type, target.repository_key)

    def record(self, change: Callable[[GateThread], Any]) -> GateThread:
        thread, _ = self.gate._apply(self.request.tenant, self.request.thread_key, change)
        return thread

    def publish(self) -> dict[str, Any]:
        gate, target, attempt, request = self.gate, self.target, self.attempt, self.request
        vcs, author, repo = gate.vcs.for_tenant(request.tenant), gate.app_identity, target.repo
        json_path, md_path = artifact_paths(request.thread_key, attempt)
        files = {json_path: evidence_pack(self.facts), md_path: evidence_summary(self.facts)}
        title, body = pr_text(self.facts, self.scope)
        branch = branch_name(request.thread_key, attempt, request.tenant)
        mode = publication_mode(dry_run=request.dry_run, publish=request.publish)
        source = target.source
        committed = sorted(set(files) | set(source.paths if source else ()))
        thread = self.record(
            lambda t: t.plan(
                attempt=attempt, mode=mode, branch_name=branch, base_branch=target.default_branch,
                committed_paths=committed, pr_title=title, pr_body=body,
                labels=labels(scope=self.scope, agent_key=request.agent_key, scenario_key=request.scenario_key),
                check_run_names=list(CHECK_NAMES), artifact_path=json_path, at=gate.clock(),
            )
        )
        if mode != "dry_run":
            self.step = "commit"
            commit = vcs.commit_branch(
                repo, base_branch=target.default_branch, branch_name=branch, files=files,
                message=title, author=author, source=source,
            )
            thread = self.record(
                lambda t: t.commit(
                    attempt=attempt, branch_name=branch, base_sha=commit.base_sha, head_sha=commit.head_sha,
                    committed_paths=committed, at=gate.clock(),
                )
            )
        if mode != "pull_request":
            checks = [scope_check(self.scope, repo), run_check(target.studio_run)]
            decision, reasons = promotion(published=False, checks=checks)
            status = "dry_run" if mode == "dry_run" else "committed"
            thread = self.record(lambda t: self.end(t, decision, reasons, status))
            return answer(thread.record(attempt))
        self.step = "pull_request"
        labels_ = thread.record(attempt)["publication"]["labels"]
        pr = vcs.open_pull_request(
            repo, branch_name=branch, base_branch=target.default_branch, title=title, body=body,
            labels=labels_, author=author,
        )
        self.record(
            lambda t: t.publish(
                attempt=attempt, run_id=target.run_id, repo=repo, repository_key=target.repository_key,
                pr_number=pr.number, pr_url=pr.url, pr_owner=pr.owner, pr_repo=pr.name, head_sha=pr.head_sha,
                merge_sha=pr.merge_sha, github_ref=pr.ref, author=author, at=gate.clock(),
            )
        )
        self.push_back(vcs, repo, branch)
        self.step = "checks"
        expected = {"thread_key": request.thread_key, "attempt": attempt, "run_id": target.run_id}
        checks = [
            evidence_check(vcs.read_file(repo, pr.head_sha, json_path), expected),
            scope_check(self.scope, repo),
            run_check(target.studio_run),
        ]
        for check in checks:
            check_id = vcs.check_run(
                repo, pr.number, head_sha=pr.head_sha, name=check.name, conclusion=check.conclusion,
                summary=check.summary, author=author,
            )
            self.record(
                lambda t, c=check, i=check_id: t.check_run(
                    attempt=attempt, check_run_id=i, name=c.name, conclusion=c.conclusion, summary=c.summary,
                    at=gate.clock(),
                )
            )
        decision, reasons = promotion(published=True, checks=checks)
        self.step = "comment"
        text = summary_comment(checks, decision, self.scope)
        comment = vcs.comment(repo, pr.number, body=text, author=author)
        evidence_url = f"{vcs.repo_url(repo)}/blob/{pr.head_sha}/{json_path}"

        def finish(t: GateThread) -> None:
            at = gate.clock()
            t.comment(attempt=attempt, comment_id=comment.id, comment_url=comment.url, body=text, at=at)
            t.evidence(
                attempt=attempt, run_id=target.run_id, repo=repo, repository_key=target.repository_key,
                repository_type=target.repository_type, scope=self.scope, evidence_url=evidence_url,
                artifact_path=json_path, pr_url=pr.url, at=at,
            )
            self.end(t, decision, reasons, "published")

        thread = self.record(finish)
        return answer(thread.record(attempt))

    def push_back(self, vcs: Vcs, repo: str, branch: str) -> None:
        """The published branch sent back to the origin the repository mirrors, recorded either
        way; an origin that refuses it changes nothing else of the publication."""
        self.step = "push"
        pushed = vcs.push_upstream(repo, branch)
        if pushed is None:
            return
        self.record(
            lambda t: t.pushed(
                attempt=self.attempt, origin=pushed.origin, branch_name=pushed.branch,
                head_sha=pushed.head_sha, status=pushed.status, error=pushed.error, at=self.gate.clock(),
            )
        )

    def end(self, thread: GateThread, decision: str, reasons: list[str], status: str) -> None:
        at = self.gate.clock()
        thread.decide(attempt=self.attempt, decision=decision, reasons=reasons, at=at)
        thread.complete(attempt=self.attempt, status=status, at=at)
