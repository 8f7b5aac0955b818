"""A project's pull requests: list, review (commits and per-file diff from git), a comment on a
line that reaches the authoring agent's mailbox, and publication through the gate.

Each route has a plain function beside it (``list_pulls``, ``pull_detail``, ``comment_line``,
``publish_pull``) taking ``(state, caller, …)``: the pages call those, with the same checks.
Reads need viewer, a comment contributor, publishing maintainer (C14, the permission graph).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import get
from litestar.datastructures import State
from litestar.params import JSONBody, PathParameter

from api.access import CONTRIBUTE, CONTROL, READ, Access, access_guard, check, guarded, project_in
from api.context import Caller, CallerDep, part, studio_commands
from api.errors import ApiError, RequestInvalid
from api.gate.dto import GateRunOut
from api.openapi import answers
from api.read_your_writes import command
from domain.gate.commands import GateRequest
from domain.portal.relations import graph_grants
from domain.shared.access import may_contribute, may_control
from domain.shared.ids import ID_PATTERN
from domain.studio.events import STOPPED
from projections.projects.pulls import pull_doc_key, pulls_partition, run_link_key
from projections.studio.surfaces import surfaces_doc_key

Slug = Annotated[str, PathParameter(pattern=ID_PATTERN, description="project slug")]
Number = Annotated[int, PathParameter(ge=1, le=2**31 - 1, description="pull request number")]
MAX_PULLS = 500
_json = msgspec.json.Decoder()


class Push(msgspec.Struct, kw_only=True):
    status: str  # "pushed" | "not_writable"
    origin: str
    branch: str
    head_sha: str
    error: str


class PullPublication(msgspec.Struct, kw_only=True):
    thread_key: str
    attempt: int
    status: str
    actor: str
    branch_name: str
    pr_url: str
    head_sha: str
    evidence_url: str
    push: Push | None
    error: str
    started_at: str
    evidence_path: str = ""  # the evidence file in the repository (documents folded before it: "")


class PullSummary(msgspec.Struct, kw_only=True):
    number: int  # the project's: 1, 2, 3… in the order its agents opened them
    project_slug: str
    run_id: str
    agent_id: str
    session_id: str
    role_key: str
    agent_nickname: str
    repository_key: str
    head_sha: str
    changed_paths: list[str]
    opened_at: str
    updated_at: str
    state: str  # "open" | "published"
    page_url: str
    session_url: str
    publications: list[PullPublication]
    title: str = ""
    plane_number: int = 0  # the plane's own number (its host's reference; it may repeat across runs)


class PullList(msgspec.Struct, kw_only=True):
    items: list[PullSummary]
    count: int


class Commit(msgspec.Struct, kw_only=True):
    sha: str
    short_sha: str
    author_name: str
    author_email: str
    authored_at: str
    subject: str
    body: str


class DiffLine(msgspec.Struct, kw_only=True):
    kind: Literal["context", "add", "del"]
    old_no: int | None
    new_no: int | None
    text: str


class Hunk(msgspec.Struct, kw_only=True):
    header: str
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: list[DiffLine]


class FileDiff(msgspec.Struct, kw_only=True):
    path: str
    old_path: str
    status: str  # added | modified | deleted | renamed | copied
    binary: bool
    additions: int
    deletions: int
    hunks: list[Hunk]


class Agent(msgspec.Struct, kw_only=True):
    agent_id: str
    role_key: str
    agent_nickname: str
    session_id: str
    session_url: str
    authored: bool


class Evidence(msgspec.Struct, kw_only=True):
    kind: str
    url: str
    detail: str
    # The evidence file's path in the repository (a gate publication's): what the page shows,
    # since ``url`` is on the VCS host, which nobody opens.
    path: str = ""


class May(msgspec.Struct, kw_only=True):
    comment: bool
    publish: bool


class PullDetail(msgspec.Struct, kw_only=True):
    pull: PullSummary
    base_sha: str
    head_sha: str
    commits: list[Commit]
    files: list[FileDiff]
    evidence: list[Evidence]
    agents: list[Agent]
    may: May
    # Why a comment cannot reach the authoring agent now ("": it can; a completed agent is
    # started again by one, see ``domain.studio.commands.reviews``).
    comment_closed: str = ""


class LineComment(msgspec.Struct, kw_only=True):
    """A review comment on one line of a pull request's diff, for the agent that wrote it."""

    path: Annotated[str, msgspec.Meta(min_length=1, max_length=1000)]
    line: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)]
    side: Literal["new", "old"] = "new"
    hunk: Annotated[str, msgspec.Meta(max_length=20_000)] = ""
    body: Annotated[str, msgspec.Meta(min_length=1, max_length=20_000, pattern=r"\S")]


class CommentAccepted(msgspec.Struct, kw_only=True):
    control_id: str
    run_id: str
    session_id: str
    verb: str
    status: str


# -- the functions the routes and the pages share -------------------------------------------------


def _doc(state: State, tenant: str, slug: str, number: int) -> dict[str, Any]:
    body = part(state, "store").get("pulls", pull_doc_key(tenant, slug, number))
    if body is None:
        raise ApiError(404, f"Project {slug!r} has no pull request {number}.", "pull_request_not_found")
    return _json.decode(body)


def list_pulls(state: State, caller: Caller, project_slug: str, *, open_only: bool = False) -> PullList:
    """The project's pull requests, newest number first."""
    check(state, caller.principal, caller.tenant, project_slug, READ)
    rows = part(state, "store").scan(
        "pulls", partition=pulls_partition(caller.tenant, project_slug), limit=MAX_PULLS, descending=True
    )
    items = [msgspec.convert(_json.decode(row.body), PullSummary) for row in rows]
    if open_only:
        items = [item for item in items if item.state == "open"]
    return PullList(items=items, count=len(items))


def _may(state: State, caller: Caller, project_slug: str) -> May:
    grants = graph_grants(part(state, "permission_graph"), caller.tenant, project_slug)
    return May(comment=may_contribute(caller.principal, grants), publish=may_control(caller.principal, grants))


def _agents(state: State, tenant: str, doc: dict[str, Any]) -> list[Agent]:
    body = part(state, "store").get("pulls", run_link_key(tenant, doc["run_id"]))
    agents = _json.decode(body)["agents"] if body is not None else {}
    return [
        Agent(agent_id=agent_id, role_key=a.get("role_key", ""), agent_nickname=a.get("agent_nickname", ""),
              session_id=a.get("session_id", ""), session_url=f"/runs/{doc['run_id']}/agents/{agent_id}",
              authored=agent_id == doc["agent_id"])
        for agent_id, a in sorted(agents.items(), key=lambda kv: (kv[0] != doc["agent_id"], kv[0]))
    ]


def _evidence(state: State, tenant: str, doc: dict[str, Any]) -> list[Evidence]:
    found = [
        Evidence(kind="gate_publication", url=p["evidence_url"] or p["pr_url"], path=p.get("evidence_path", ""),
                 detail=f"gate run {p['attempt']}: {p['status']}" + (f", push {p['push']['status']}" if p["push"] else ""))
        for p in doc["publications"]
    ]
    body = part(state, "store").get("surfaces", surfaces_doc_key(tenant, doc["run_id"]))
    evidence = (_json.decode(body).get("evidence") or {}) if body is not None else {}
    for proof in evidence.get("proofs", []) if isinstance(evidence, dict) else []:
        kind, _, ref = str(proof).partition(":")
        found.append(Evidence(kind=f"run_{kind}", url=ref if "/" in ref else "", detail=ref))
    return found


def _changes(state: State, run: Any, doc: dict[str, Any]) -> dict[str, Any]:
    """The pull request's commits and per-file diff, read from its repository."""
    reviews = part(state, "reviews")
    if reviews is None:
        raise ApiError(503, "This service has no repository reader for pull requests.", "vcs_unavailable")
    return reviews.pull_changes(run, doc["agent_id"], doc["head_sha"])


def comment_closed(state: State, run: Any, agent_id: str) -> str:
    """Why a comment cannot reach the agent now, as the comment endpoint's 409 says it ("": it can)."""
    if run.ended:
        return f"Run {run.run_id} has ended ({run.status}): its agents no longer work, so a comment cannot reach {agent_id}."
    session = studio_commands(state).runs.agent_session(run, agent_id)
    if session.live_status == STOPPED:
        return f"Agent {agent_id} was stopped by an operator; a review comment does not start it again."
    return ""


def pull_detail(state: State, caller: Caller, project_slug: str, number: int) -> PullDetail:
    """One pull request with its commits and per-file diff (git), evidence, agents and what the
    caller may do with it."""
    check(state, caller.principal, caller.tenant, project_slug, READ)
    doc = _doc(state, caller.tenant, project_slug, number)
    run = studio_commands(state).runs.get_run(caller.tenant, doc["run_id"])
    changes = _changes(state, run, doc)
    return PullDetail(
        pull=msgspec.convert(doc, PullSummary),
        base_sha=changes["base_sha"],
        head_sha=changes["head_sha"],
        commits=msgspec.convert(changes["commits"], list[Commit]),
        files=msgspec.convert(changes["files"], list[FileDiff]),
        evidence=_evidence(state, caller.tenant, doc),
        agents=_agents(state, caller.tenant, doc),
        may=_may(state, caller, project_slug),
        comment_closed=comment_closed(state, run, doc["agent_id"]),
    )


def comment_text(number: int, comment: LineComment, reviewer: str) -> str:
    """What the agent's mailbox receives: where, by whom, the quoted hunk, then the comment."""
    quoted = "\n".join(f"> {line}" for line in comment.hunk.splitlines()) if comment.hunk else ""
    where = f"{comment.path} line {comment.line}" + (" (before the change)" if comment.side == "old" else "")
    return "\n".join(
        part for part in (
            f"Review comment on pull request #{number}, {where}, from {reviewer}:",
            quoted,
            comment.body.strip(),
        ) if part
    )


def check_line(files: list[dict[str, Any]], number: int, comment: LineComment) -> None:
    """A comment names a file of the pull request's diff and a line of it on its side (the new
    file's lines, or the old one's for a removed line): else a 422 naming the field."""
    found = next((f for f in files if f["path"] == comment.path), None)
    if found is None:
        raise RequestInvalid(["body", "path"], f"{comment.path!r} is not a file pull request {number} changes",
                             "value_error", comment.path)
    side = "new_no" if comment.side == "new" else "old_no"
    if not any(line[side] == comment.line for hunk in found["hunks"] for line in hunk["lines"]):
        where = "the new file" if comment.side == "new" else "the old file"
        raise RequestInvalid(["body", "line"], f"line {comment.line} of {where} is not in pull request {number}'s diff "
                             f"of {comment.path!r}", "value_error", comment.line)


def comment_line(state: State, caller: Caller, project_slug: str, number: int, comment: LineComment) -> CommentAccepted:
    """``comment_agent`` to the pull request's author with the file, line and quoted hunk: a
    completed author works again on it; an ended run or a stopped author is a 409."""
    check(state, caller.principal, caller.tenant, project_slug, CONTRIBUTE)
    doc = _doc(state, caller.tenant, project_slug, number)
    if comment.path not in doc["changed_paths"]:
        raise RequestInvalid(["body", "path"], f"{comment.path!r} is not a file pull request {number} changes",
                             "value_error", comment.path)
    run = studio_commands(state).runs.get_run(caller.tenant, doc["run_id"])
    check_line(_changes(state, run, doc)["files"], number, comment)
    outcome = studio_commands(state).reviews.comment(
        tenant=caller.tenant, run_id=doc["run_id"], agent_id=doc["agent_id"],
        message=comment_text(number, comment, caller.subject_key), reason=f"review of pull request #{number}",
        actor=caller.subject_key,
    )
    return CommentAccepted(control_id=outcome.control_id, run_id=outcome.run_id, session_id=outcome.session_id,
                           verb=outcome.verb, status=outcome.status)


def publish_pull(state: State, caller: Caller, project_slug: str, number: int) -> dict[str, Any]:
    """The gate thread of the pull request's run, for its author: the gate run record."""
    check(state, caller.principal, caller.tenant, project_slug, CONTROL)
    doc = _doc(state, caller.tenant, project_slug, number)
    return part(state, "gate").run_thread(
        GateRequest(tenant=caller.tenant, thread_key=doc["run_id"], actor=caller.subject_key, agent_key=doc["agent_id"],
                    notes=f"pull request #{number} of {project_slug}")
    )


# -- routes ----------------------------------------------------------------------------------


@get("/projects/{project_slug:str}/pulls", sync_to_thread=True, guards=[access_guard],
     summary="A project's pull requests (newest first)",
     opt=guarded(Access(READ, project_in("path", "project_slug")), **answers(401, 403, 404, 422)))
def get_pulls(project_slug: Slug, state: State, caller: CallerDep) -> PullList:
    return list_pulls(state, caller, project_slug)


@get("/projects/{project_slug:str}/pulls/{number:int}", sync_to_thread=True, guards=[access_guard],
     summary="A pull request: commits and per-file diff from its repository, evidence, agents",
     opt=guarded(Access(READ, project_in("path", "project_slug")), **answers(401, 403, 404, 422, 503)))
def get_pull(project_slug: Slug, number: Number, state: State, caller: CallerDep) -> PullDetail:
    return pull_detail(state, caller, project_slug, number)


@command("/projects/{project_slug:str}/pulls/{number:int}/comments", status_code=202,
      guards=[access_guard],
      summary="Comment on a line: comment_agent to the authoring agent's mailbox (contributor or above)",
      opt=guarded(Access(CONTRIBUTE, project_in("path", "project_slug")), **answers(401, 403, 404, 409, 422, 503)))
def post_comment(
    project_slug: Slug, number: Number, data: JSONBody[LineComment], state: State, caller: CallerDep
) -> CommentAccepted:
    return comment_line(state, caller, project_slug, number, data)


@command("/projects/{project_slug:str}/pulls/{number:int}/publish", status_code=200,
      guards=[access_guard],
      summary="Publish through the gate (maintainer or above); the branch goes back to a brought repository's origin",
      opt=guarded(Access(CONTROL, project_in("path", "project_slug")), **answers(401, 403, 404, 409, 422, 503)))
def post_publish(project_slug: Slug, number: Number, state: State, caller: CallerDep) -> GateRunOut:
    return msgspec.convert(publish_pull(state, caller, project_slug, number), GateRunOut)


ROUTES = [get_pulls, get_pull, post_comment, post_publish]
