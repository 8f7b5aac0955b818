"""Runs driven through the real domain by generated operations, for the feed's property tests.

A scenario is a project (metadata in camelCase or snake_case), one launched run and a list
of operations: what an execution plane does to sessions (start, tools, messages, blockers,
handoffs, pull requests, final results) and what operators do through control verbs.
Operations the aggregates' guards refuse are skipped, as the ticker skips rejected steps,
so every event in the log is one the service could really record.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from domain.shared.errors import DomainError
from domain.shared.ids import session_key
from domain.studio.control import ControlIntent

TENANT = "default"
ACTOR = "operator@example.com"
TOOLS = (
    "Read",
    "Edit",
    "Bash",
    "mcp__vcs__read_file",
    "mcp__vcs__push_branch",
    "mcp__board__create_issue",
    "mcp__catalog__lookup",
    "mcp__browser__screenshot",
    "dispatch_slot_prompt",
    "agent_mailbox",
    "acquire_execution_slot",
)
BLOCKERS = (
    "agent_first_tool_required",
    "sandbox_missing",
    "project_delivery_completion_requires_pr",
    "project_assets_lookup_failed",
    "some_new_wall",
)
EXTRA_AGENTS = ("backend", "frontend", "tester", "compactor", "tester-admin")
SESSION_VERBS = (
    "pause_session",
    "queue_request",
    "stop_session",
    "intervene",
    "comment_agent",
    "reply_thread",
    "nudge_agent",
    "create_task_card",
    "create_followup_task",
    "switch_agent_process",
    "retry_prompt",
)
COSTS = st.one_of(
    st.none(),
    st.floats(min_value=-1.0, max_value=5.0, allow_nan=False).map(lambda v: round(v, 4)),
    st.integers(min_value=-2, max_value=3),
    st.just("free"),
)


@st.composite
def project_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A project create request whose metadata comes in either casing."""
    camel = draw(st.booleans())
    repos = draw(st.lists(st.sampled_from(["acme/design", "acme/docs", "acme/spec"]), max_size=2, unique=True))
    oci = draw(st.sampled_from([None, {"artifact": "oci://acme/src", "version": "1.2.0"}]))
    bundle = draw(st.sampled_from([None, "", "legacy bundle text"]))
    assembly: dict[str, Any] = {}

    def key(snake: str, camel_name: str) -> str:
        return camel_name if camel else snake

    if repos:
        assembly[key("source_ref_repos", "sourceRefRepos")] = [{"slug": r, "branch": "main"} for r in repos]
    if oci is not None:
        assembly[key("source_ref_oci", "sourceRefOci")] = oci
    if bundle is not None:
        assembly[key("source_ref_bundle", "sourceRefBundle")] = bundle
    assembly[key("agent_squad_suit_tester_roles", "agentSquadSuitTesterRoles")] = ["admin", "guest"]
    request = {
        "project_key": "acme",
        "display_name": "Acme",
        "proposal_id": draw(st.sampled_from(["", "proposal-7"])),
        key("repository_bindings", "projectRepositoryBindings"): [
            {"repository_key": "assembly", "vcs_repo_slug": "acme/assembly", "repository_type": "assembly"},
            {"repository_key": "backend", "vcs_repo_slug": "acme/api"},
            {"repository_key": "frontend", "vcs_repo_slug": "acme/web"},
        ],
        key("project_assembly", "projectAssembly"): assembly,
    }
    return request


def expected_source_mode(request: dict[str, Any]) -> str:
    """The spec's priority, read independently of the service's code."""
    assembly = request.get("project_assembly") or request.get("projectAssembly") or {}
    get = lambda *names: next((assembly[n] for n in names if assembly.get(n) is not None), None)  # noqa: E731
    oci = get("source_ref_oci", "sourceRefOci")
    repos = get("source_ref_repos", "sourceRefRepos") or []
    bundle = get("source_ref_bundle", "sourceRefBundle")
    if isinstance(oci, dict) and (oci.get("artifact") or oci.get("version")):
        return "oci"
    if repos:
        return "github_array"
    if isinstance(bundle, str) and bundle.strip():
        return "bundle"
    return "none"


AGENT = st.integers(min_value=0, max_value=6)
FINISH = st.tuples(
    COSTS,
    st.one_of(st.none(), st.integers(-1, 90_000)),
    st.one_of(st.none(), st.integers(-1, 40)),
    st.sampled_from(["success", "success", "changes_requested", "error"]),
)
# "advance" moves a session along its natural path (start, first tool, work, pull request,
# final result): most generated steps are ones a plane would really take.
ADVANCE = st.tuples(
    st.just("advance"), AGENT, st.integers(0, 2**32), st.integers(1, 10),
    st.sampled_from(["backend", "frontend", "assembly"]), FINISH,
)
OPERATIONS = st.one_of(
    ADVANCE,
    ADVANCE,
    ADVANCE,
    ADVANCE,
    ADVANCE,
    ADVANCE,
    ADVANCE,
    ADVANCE,
    st.tuples(st.just("start"), AGENT),
    st.tuples(st.just("tool"), AGENT, st.sampled_from(TOOLS)),
    st.tuples(st.just("say"), AGENT),
    st.tuples(st.just("fail"), AGENT, st.sampled_from(TOOLS)),
    st.tuples(st.just("model"), AGENT, st.sampled_from(["claude-sonnet-4-5", "gpt-5-codex", "standin-model"])),
    st.tuples(st.just("block"), AGENT, st.sampled_from(BLOCKERS)),
    st.tuples(st.just("unblock"), AGENT),
    st.tuples(st.just("handoff"), AGENT, AGENT),
    st.tuples(st.just("pr"), AGENT, st.sampled_from(["backend", "frontend", "assembly"]), st.integers(1, 3)),
    st.tuples(st.just("finish"), AGENT, FINISH),
    st.tuples(st.just("join"), st.sampled_from(EXTRA_AGENTS), AGENT),
    st.tuples(st.just("join"), st.sampled_from(EXTRA_AGENTS), AGENT),
    st.tuples(st.just("verb"), AGENT, st.sampled_from(SESSION_VERBS)),
    st.tuples(st.just("verb"), AGENT, st.sampled_from(SESSION_VERBS)),
    st.tuples(st.just("run"), st.sampled_from(["go", "go", "go", "execute", "preview"])),
    st.tuples(st.just("run_end"), st.sampled_from(["complete", "cleanup"]), st.integers(0, 9)),
)


@dataclass
class Scenario:
    """The run a scenario built, and what the test needs to check it."""

    app: Any
    run_id: str
    request: dict[str, Any]
    applied: list[tuple[Any, ...]] = field(default_factory=list)

    def run(self) -> Any:
        return self.app.studio.runs.get_run(TENANT, self.run_id)

    def sessions(self) -> list[Any]:
        run = self.run()
        return [
            self.app.event_store.repository.get(session_key(TENANT, self.run_id, sid, agent_id))
            for agent_id, sid in run.sessions.items()
        ]


def launch(app: Any, request: dict[str, Any]) -> Scenario:
    app.projects.create_project(tenant=TENANT, request=request, created_by=ACTOR)
    run, _ = app.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by=ACTOR)
    return Scenario(app=app, run_id=run.run_id, request=request)


def apply_all(scenario: Scenario, operations: list[tuple[Any, ...]], after_each: Any = None) -> None:
    for op in operations:
        try:
            apply_one(scenario, op)
            scenario.applied.append(op)
        except DomainError:
            pass  # the aggregate refused it, as it would refuse a plane's step
        if after_each is not None:
            after_each()


def _session(scenario: Scenario, index: int) -> Any:
    run = scenario.run()
    agents = list(run.sessions.items())
    agent_id, sid = agents[index % len(agents)]
    return scenario.app.event_store.repository.get(session_key(TENANT, scenario.run_id, sid, agent_id))


def apply_one(scenario: Scenario, op: tuple[Any, ...]) -> None:
    app, kind = scenario.app, op[0]
    at = app.clock()
    if kind in ("run", "run_end"):
        if kind == "run_end" and op[2] != 0:
            return  # ending the run ends the scenario: keep it rare
        _run_op(scenario, op[1], at)
        return
    if kind == "join":
        run = scenario.run()
        if op[1] in run.sessions:
            return
        template = app.studio.templates.get(run.template_id)
        spec_id = "tester" if op[1].startswith("tester") else op[1]
        source = _session(scenario, op[2])
        suit = {"suit_id": "admin", "role_key": "role_tester", "title": "Admin"} if op[1] == "tester-admin" else None
        target = app.studio.opener.open_session(
            run, template, template.spec(spec_id),
            joined_via={"kind": "delivery_lane", "from_agent_id": source.agent_id, "reason": "slice"},
            agent_id=op[1], suit=suit,
        )
        app.event_store.save(run, target)
        return
    session = _session(scenario, op[1])
    if kind == "verb":
        _verb(scenario, session, op[2])
        return
    if kind == "start":
        session.start_process(
            llm_session_id=f"llm-{session.agent_id}-{session.process_attempt + 1}",
            skill_ids=["skill-a"],
            mcp_server_ids=["vcs", "board"] if session.role_key != "role_tester" else ["vcs", "browser", "errors"],
            workspace_name="ws-acme-shared",
            at=at,
        )
    elif kind == "tool":
        session.call_tool(tool_name=op[2], route=f"phase/{session.agent_id}", summary="work", at=at)
    elif kind == "say":
        session.say("progress note", at)
    elif kind == "fail":  # a denied or failed call: counted apart, never moving the session
        session.fail_tool_call(tool_name=op[2], reason="permission denied", route="phase/denied", at=at)
    elif kind == "model":
        session.report_model(op[2], at)
    elif kind == "block":
        session.block(code=op[2], message=f"{op[2]} seen", evidence={}, at=at)
    elif kind == "unblock":
        session.unblock(resolution="cleared", actor=ACTOR, at=at)
    elif kind == "handoff":
        target = _session(scenario, op[2])
        session.hand_off(
            target_agent_id=target.agent_id, target_session_id=target.session_id,
            reason="route work", thread_id=f"thr-{session.agent_id}-{target.agent_id}", at=at,
        )
    elif kind == "pr":
        repo = {"backend": "api", "frontend": "web", "assembly": "assembly"}[op[2]]
        session.open_pull_request(
            pr_url=f"https://vcs.example/acme/{repo}/pull/{op[3]}", pr_owner="acme", pr_repo=repo,
            pr_number=op[3], repository_key=op[2], at=at, head_sha=f"{op[3]:040x}", changed_paths=[f"{op[2]}.py"],
        )
    elif kind == "finish":
        session.finish(result=final_result(op[2]), at=at)
    elif kind == "advance":
        _advance(scenario, session, op, at)
    app.event_store.save(session)


def final_result(finish: tuple[Any, ...]) -> dict[str, Any]:
    """A final result as an agent CLI reports it; any number may be missing or odd."""
    cost, duration, turns, subtype = finish
    result: dict[str, Any] = {"type": "result", "subtype": subtype, "is_error": subtype == "error", "result": "done"}
    if cost is not None:
        result["total_cost_usd"] = cost
    if duration is not None:
        result["duration_ms"] = duration
    if turns is not None:
        result["num_turns"] = turns
    return result


def _advance(scenario: Scenario, session: Any, op: tuple[Any, ...], at: str) -> None:
    """Up to ``steps`` natural steps of one session, choices drawn from the op's seed."""
    _, _, seed, steps, repo_key, finish = op
    rng = random.Random(seed)
    for _ in range(steps):
        if session.ended:
            return
        _step(session, rng.randrange(100), rng.choice(TOOLS), repo_key, finish, at)


def _step(session: Any, choice: int, tool: str, repo_key: str, finish: tuple[Any, ...], at: str) -> None:
    status = session.live_status
    if status == "ready":
        servers = ["vcs", "board"] if session.role_key != "role_tester" else ["vcs", "browser", "errors"]
        session.start_process(
            llm_session_id=f"llm-{session.agent_id}-{session.process_attempt + 1}",
            skill_ids=["skill-a"], mcp_server_ids=servers, workspace_name="ws-acme-shared", at=at,
        )
    elif status == "waiting_first_tool":
        session.call_tool(tool_name=tool if choice < 70 else "Read", route="phase/first", summary="first", at=at)
    elif status == "working":
        if choice < 60:
            session.call_tool(tool_name=tool, route=f"phase/{session.agent_id}", summary="work", at=at)
        elif choice < 65:
            session.say("progress note", at)
        elif choice < 80:
            repo = {"backend": "api", "frontend": "web", "assembly": "assembly"}[repo_key]
            session.open_pull_request(
                pr_url=f"https://vcs.example/acme/{repo}/pull/{choice % 3}", pr_owner="acme", pr_repo=repo,
                pr_number=choice % 3, repository_key=repo_key, at=at, head_sha=f"{choice:040x}",
                changed_paths=[f"{repo_key}.py"],
            )
        elif choice < 88:
            session.finish(result=final_result(finish), at=at)
    elif status == "blocked" and choice < 30:
        session.unblock(resolution="cleared", actor=ACTOR, at=at)


def _verb(scenario: Scenario, session: Any, verb: str) -> None:
    params: dict[str, str] = {"reason": "test"}
    if verb in ("intervene", "comment_agent"):
        params["message"] = "please look"
    elif verb == "reply_thread":
        params.update(message="answer", thread_id="thr-operator")
    elif verb == "queue_request":
        params.update(message="next", wake_target=session.agent_id)
    elif verb in ("create_task_card", "create_followup_task"):
        params["title"] = "follow up"
    elif verb == "switch_agent_process":
        params.update(provider="claude-code-cli", effort="high")
    scenario.app.studio.control.control_session(
        tenant=TENANT, run_id=scenario.run_id, session_id=session.session_id,
        intent=ControlIntent(verb=verb, **params), actor=ACTOR,
    )


def _run_op(scenario: Scenario, what: str, at: str) -> None:
    app = scenario.app
    if what == "execute":
        app.studio.runs.request_execution(tenant=TENANT, run_id=scenario.run_id, requested_by=ACTOR)
        return
    if what == "preview":
        app.studio.runs.share_preview(tenant=TENANT, run_id=scenario.run_id, fields={"url": "https://preview.example/acme"})
        return
    if what == "cleanup":
        app.studio.runs.cleanup_run(tenant=TENANT, run_id=scenario.run_id, actor=ACTOR, reason="done")
        return
    run = scenario.run()
    if what == "go" and run.status == "ready":
        app.studio.runs.request_execution(tenant=TENANT, run_id=scenario.run_id, requested_by=ACTOR)
        return
    if what == "go" and run.status == "scheduled":
        run.start_execution(at)
    elif what == "go":
        run.record_tick(run.tick + 1, at, {"tick": run.tick + 1, "status": "running", "at": at})
    elif what == "complete":
        run.complete(at, {"sessions": len(run.sessions)})
    app.event_store.save(run)
