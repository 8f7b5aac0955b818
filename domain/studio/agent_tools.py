"""The squad's own tools as agents call them, and what an agent's stream means as steps.

An agent acts on its squad through four tools of the ``squadops`` MCP server; an agent CLI
names them ``mcp__squadops__<tool>``. The MCP server checks a call against the run and
answers; the effect is recorded from the agent's stream when the CLI reports the call's
successful result, as the same steps the simulator produces (``domain.shared.ports``).
Pure: arguments are checked here, the run's facts are passed in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.shared import ports
from domain.shared.errors import Invalid
from domain.shared.ids import is_valid_id
from domain.studio import agent_stream as stream
from domain.studio.policies.blockers import AGENT_PERMISSION_DENIED
from domain.studio.policies.first_tool import counts_as_first_tool

SERVER = "squadops"
PREFIX = f"mcp__{SERVER}__"
HANDOFF, OPEN_PULL_REQUEST, COMMENT, REPORT = "handoff_agent", "open_pull_request", "comment_agent", "report"
MESSAGE_LIMIT = 4000


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_TEXT = {"type": "string"}
_AGENT = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,128}$"}

# name -> (description, JSON Schema of the arguments)
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    HANDOFF: (
        "Hand work to another agent of the squad (a delivery lane such as backend, a tester "
        "such as tester-<suit>, or the compactor); its session is created when it has none.",
        _schema({"target_agent_id": _AGENT, "message": _TEXT}, ["target_agent_id", "message"]),
    ),
    OPEN_PULL_REQUEST: (
        "Propose your worktree branch as a pull request on your lane's repository.",
        _schema({"title": _TEXT, "body": _TEXT, "repository_key": _AGENT}, ["title"]),
    ),
    COMMENT: (
        "Leave a message in another agent's mailbox.",
        _schema({"target_agent_id": _AGENT, "message": _TEXT}, ["target_agent_id", "message"]),
    ),
    REPORT: (
        "Report your status to the squad's HUD (not delivery work: never your first tool).",
        _schema({"status": _TEXT, "summary": _TEXT}, ["summary"]),
    ),
}


def full_name(tool: str) -> str:
    return f"{PREFIX}{tool}"


def squad_tool(name: str) -> str:
    """``handoff_agent`` for ``mcp__squadops__handoff_agent``; "" for any other tool."""
    return name.removeprefix(PREFIX) if name.startswith(PREFIX) and name[len(PREFIX):] in TOOLS else ""


def check_arguments(tool: str, arguments: Mapping[str, Any]) -> dict[str, str]:
    """The call's arguments as strings; raises ``Invalid`` naming what is wrong."""
    if tool not in TOOLS:
        raise Invalid(f"Unknown tool {tool!r}; the squad's tools are {', '.join(TOOLS)}.", code="unknown_tool")
    schema = TOOLS[tool][1]
    unknown = sorted(set(arguments) - set(schema["properties"]))
    if unknown:
        raise Invalid(f"{tool} takes no argument {unknown[0]!r}.", code="invalid_arguments")
    checked: dict[str, str] = {}
    for name in schema["properties"]:
        value = arguments.get(name, "")
        if not isinstance(value, str):
            raise Invalid(f"{tool}: {name} must be a string.", code="invalid_arguments")
        if name in schema["required"] and not value.strip():
            raise Invalid(f"{tool}: {name} is required.", code="invalid_arguments")
        if name.endswith(("_agent_id", "_key")) and value and not is_valid_id(value):
            raise Invalid(f"{tool}: {name} must be an id of [A-Za-z0-9_-].", code="invalid_arguments")
        checked[name] = value.strip()[:MESSAGE_LIMIT]
    return checked


# -- what a call does --------------------------------------------------------------------------


@dataclass(frozen=True)
class PullRequestTarget:
    repository_key: str
    pr_owner: str
    pr_repo: str
    pr_number: int


def lane_binding(facts: Mapping[str, Any], agent_id: str, repository_key: str = "") -> dict[str, Any]:
    """The repository binding an agent's work lands in: its lane, else the assembly one."""
    bindings = {str(b.get("repository_key", "")): b for b in facts.get("repository_bindings", [])}
    found = bindings.get(repository_key or agent_id) or next(
        (b for b in bindings.values() if b.get("repository_type") == "assembly"), None
    )
    return dict(found or {})


def pull_request_target(
    facts: Mapping[str, Any], project_slug: str, tenant: str, run_id: str, agent_id: str, ordinal: int,
    repository_key: str = "",
) -> PullRequestTarget:
    """Where the agent's ``ordinal``-th pull request of the run is opened (stable numbers)."""
    binding = lane_binding(facts, agent_id, repository_key)
    key = str(binding.get("repository_key") or repository_key or agent_id)
    slug = str(binding.get("vcs_repo_slug") or f"{project_slug}-{key}")
    owner, _, repo = slug.rpartition("/")
    digest = hashlib.sha256(f"{run_id}|{agent_id}|{ordinal}".encode()).digest()
    return PullRequestTarget(key, owner or tenant, repo, 1000 + int.from_bytes(digest[:4], "big") % 9000)


def handoff_spec(facts: Mapping[str, Any], target_agent_id: str) -> tuple[str, dict[str, str]]:
    """The template agent a target stands for, and its actor suit (``tester-<suit>``)."""
    if not target_agent_id.startswith("tester-"):
        return target_agent_id, {}
    suit_id = target_agent_id.removeprefix("tester-")
    suit = next((s for s in facts.get("suits", []) if s.get("suit_id") == suit_id), None)
    return "tester", dict(suit or {"suit_id": suit_id, "role_key": "role_tester", "title": suit_id})


def effect_step(run: Any, session: Any, tool: str, arguments: Mapping[str, Any]) -> ports.Step | None:
    """The step a successful call of a squad tool records (a report records no more than its call)."""
    args = check_arguments(tool, arguments)
    agent = session.agent_id
    if tool == HANDOFF:
        spec, suit = handoff_spec(run.project_facts, args["target_agent_id"])
        return ports.Handoff(
            agent_id=agent, target_agent_id=args["target_agent_id"], spec_agent_id=spec,
            kind="agent", reason=args["message"], suit=suit,
        )
    if tool == COMMENT:
        return ports.Comment(agent_id=agent, target_agent_id=args["target_agent_id"], message=args["message"])
    if tool == OPEN_PULL_REQUEST:
        target = pull_request_target(
            run.project_facts, run.project_slug, run.tenant, run.run_id, agent,
            session.pull_requests + 1, args["repository_key"],
        )
        return ports.OpenPullRequest(
            agent_id=agent, repository_key=target.repository_key, pr_owner=target.pr_owner,
            pr_repo=target.pr_repo, pr_number=target.pr_number, title=args["title"],
        )
    return None


# -- a stream's signals as steps -----------------------------------------------------------------

_FIELDS = ("command", "file_path", "path", "pattern", "query", "url", "description", "summary")


def describe(name: str, arguments: Mapping[str, Any]) -> str:
    """A short summary of a tool call for the log dock."""
    tool = squad_tool(name)
    if tool in (HANDOFF, COMMENT):
        return stream.excerpt(f"{tool} to {arguments.get('target_agent_id', '')}: {arguments.get('message', '')}", 200)
    for field in _FIELDS:
        if isinstance(arguments.get(field), str) and arguments[field]:
            return stream.excerpt(f"{name}: {arguments[field]}", 200)
    return stream.excerpt(f"{name} {json.dumps(arguments, sort_keys=True, default=str)}", 200)


def denied_tools(denials: list[dict[str, Any]]) -> list[str]:
    """The tools of a result's ``permission_denials``, each once, in order."""
    return list(dict.fromkeys(str(d.get("tool_name", "")) or "unknown_tool" for d in denials))


def _input(denial: Mapping[str, Any]) -> dict[str, Any]:
    arguments = denial.get("tool_input")
    return arguments if isinstance(arguments, dict) else {}


def permission_block(agent_id: str, denials: list[dict[str, Any]], result: Mapping[str, Any]) -> ports.Block:
    """``agent_permission_denied``: the tools the CLI denied, and what to do about it."""
    tools = denied_tools(denials)
    first = denials[0]
    what = describe(str(first.get("tool_name", "")), _input(first))
    metrics = {k: result[k] for k in ("total_cost_usd", "duration_ms", "num_turns", "usage") if k in result}
    return ports.Block(
        agent_id=agent_id, code=AGENT_PERMISSION_DENIED,
        message=f"The agent CLI denied {len(denials)} tool call(s) of {', '.join(tools)} (first: {what}) and "
                "the work stopped there. Allow the tool in the agent's CLI settings or switch its process, "
                "then retry_prompt to start it again in the same worktree.",
        evidence={"denied_tools": tools, "denial_count": len(denials), "result": metrics,
                  # what each call asked (its summary, never its whole input: a Write carries a file)
                  "permission_denials": [
                      {"tool_name": str(d.get("tool_name", "")), "tool_use_id": str(d.get("tool_use_id", "")),
                       "summary": describe(str(d.get("tool_name", "")), _input(d))}
                      for d in denials[:10]
                  ]},
    )


def route_of(arguments: Mapping[str, Any]) -> str:
    for field in ("file_path", "path", "url"):
        if isinstance(arguments.get(field), str):
            return stream.excerpt(arguments[field], 120)
    return ""


class StepTranslator:
    """Turns one process's signals into steps for its session.

    A tool call is recorded when its result arrives: a successful one as ``CallTool`` (the
    first tool, when it counts as one) followed by its squad effect; a denied or failed one
    as ``FailToolCall``, which is counted apart and never satisfies the first-tool contract.
    Calls awaiting their result are ``in_flight``. A result listing ``permission_denials``
    (Claude Code's result line; a Codex turn with refused calls) blocks the session with
    ``agent_permission_denied`` instead of completing it.
    """

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.failed_calls: set[str] = set()
        self.first_tool_seen = False
        self.walled = False  # the run's result put up the permission wall

    @property
    def in_flight(self) -> bool:
        """Whether a tool call was made whose result has not arrived yet."""
        return bool(self.calls)

    @property
    def oldest_in_flight(self) -> str:
        """The tool of the oldest call still awaiting its result ("" when none)."""
        return next(iter(self.calls.values()), ("", {}))[0]

    def steps(self, signal: stream.Signal, run: Any, session: Any) -> list[ports.Step]:
        agent = self.agent_id
        match signal:
            case stream.ToolUse(call_id=call_id, name=name, input=arguments):
                self.calls[call_id] = (name, dict(arguments))
                return []
            case stream.ToolResult(call_id=call_id, name=reported, is_error=is_error, text=text, output=output):
                name, arguments = self.calls.pop(call_id, (reported, {}))
                if not name:
                    return []
                if is_error:
                    self.failed_calls.add(call_id)
                    return [self._failed(name, arguments, text or "the call failed", output)]
                self.first_tool_seen = self.first_tool_seen or counts_as_first_tool(name)
                steps: list[ports.Step] = [
                    ports.CallTool(
                        agent_id=agent, tool_name=name, route=route_of(arguments),
                        summary=describe(name, arguments), result=output,
                    )
                ]
                tool = squad_tool(name)
                if not tool:
                    return steps
                try:
                    step = effect_step(run, session, tool, arguments)
                except Invalid as exc:
                    return steps + [self.log("warn", f"{name} has unusable arguments: {exc.message}")]
                return steps + ([step] if step is not None else [])
            case stream.ModelSeen(model=model):
                return [ports.ReportModel(agent_id=agent, model=model)]
            case stream.Text(text=text):
                return [ports.Say(agent_id=agent, text=text)]
            case stream.Result(result=result):
                return self._result(dict(result))
            case stream.Notice(level=level, text=text):
                return [self.log(level, text)]
            case stream.Malformed(line=line, reason=reason):
                return [self.log("warn", f"malformed stream line ({reason}): {line}")]
        return []

    def _failed(self, name: str, arguments: Mapping[str, Any], reason: str, output: str = "") -> ports.FailToolCall:
        return ports.FailToolCall(
            agent_id=self.agent_id, tool_name=name, reason=stream.excerpt(reason, 300),
            route=route_of(arguments), summary=describe(name, arguments), result=output,
        )

    def _result(self, result: dict[str, Any]) -> list[ports.Step]:
        self.calls.clear()  # the run is over: a call with no result will never have one
        denials = [d for d in result.get("permission_denials") or [] if isinstance(d, dict)]
        if not denials:
            return [ports.Finish(agent_id=self.agent_id, result=result)]
        steps: list[ports.Step] = []
        for denial in denials:
            call_id = str(denial.get("tool_use_id", ""))
            if call_id and call_id in self.failed_calls:
                continue  # its failed result was counted already
            if call_id:
                self.failed_calls.add(call_id)
            steps.append(self._failed(str(denial.get("tool_name", "")) or "unknown_tool", _input(denial),
                                      "permission denied"))
        steps.append(permission_block(self.agent_id, denials, result))
        self.walled = True
        return steps

    def log(self, level: str, text: str, stream_name: str = "stdout") -> ports.RunnerOutput:
        return ports.RunnerOutput(agent_id=self.agent_id, stream=stream_name, level=level, text=text)
