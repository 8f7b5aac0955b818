"""``POST /v1/portal/copilot/actions``: the copilot over the portal's own read models (C15).

Facts come from the read models the caller may read (the permission graph decides); the
answerer (built-in, or the model proxy when configured) words them; each turn is recorded
on the thread as an event. ``draft_followup_task`` answers a real ``create_followup_task``
control intent for the operator to confirm; ``propose_ui_actions`` proposes tool calls
(``page.scroll``, ``page.click``, ``page.fill``) from the page's interaction manifest.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import structlog
from litestar.datastructures import State
from litestar.params import JSONBody

from api.access import check
from api.context import Caller, CallerDep, event_store, part, studio_reads
from api.errors import ApiError, RequestInvalid
from api.openapi import answers, refined_body
from api.portal.workspace import viewer
from api.read_your_writes import command
from domain.portal.copilot import ACTIONS, ComposedAnswerer, CopilotThread, thread_key
from domain.shared.clock import utc_now_iso
from domain.shared.ids import is_valid_id, new_id

log = structlog.get_logger("squadops.copilot")
Short = Annotated[str, msgspec.Meta(max_length=2000)]
# A copilot request is a question about a page, recorded on its thread as it came: 64 KB
# at most (413 ``body_too_large`` beyond), so no turn stores a large payload forever.
MAX_BODY_BYTES = 64 << 10
TOOL_BY_KIND = {"button": "page.click", "link": "page.click", "input": "page.fill", "field": "page.fill"}


class ManifestItem(msgspec.Struct, kw_only=True):
    id: Short
    kind: Short
    label: Short
    description: Short = ""
    value_hint: Short = ""
    widget_role: Short = ""
    owner_surface: Short = ""
    priority: int = 0


class PortalCopilotActionIn(msgspec.Struct, kw_only=True):
    action_id: Short
    page_path: Short = "/"
    surface_key: Short = "portal"
    entity_ref: Short = ""
    selected_text: Short = ""
    draft_target_id: Short = ""
    instruction_notes: Short = ""
    thread_id: Short = ""
    interaction_manifest: Annotated[list[ManifestItem], msgspec.Meta(max_length=200)] = []
    payload: dict[str, Any] = {}


class Capability(msgspec.Struct, kw_only=True):
    action_id: str
    label: str
    summary: str = ""
    state: str = "allowed"
    reason: str = ""


class ToolCall(msgspec.Struct, kw_only=True):
    id: str
    name: str
    description: str
    state: str = "proposed"
    selector: str = ""
    value: str = ""
    policy_reason: str = ""


class PortalCopilotMessageOut(msgspec.Struct, kw_only=True):
    thread_id: str
    message: str
    status: str = "answered"
    capabilities: list[Capability] = []
    tool_calls: list[ToolCall] = []
    ui_artifacts: list[dict[str, Any]] = []


def _run_id(data: PortalCopilotActionIn) -> str:
    ref = data.entity_ref
    run_id = ref.removeprefix("run:") if ref.startswith("run:") else str(data.payload.get("run_id") or "")
    if not run_id:
        raise RequestInvalid(["body", "entity_ref"], "this action needs a run: entity_ref run:<id> or payload.run_id",
                             "missing")
    return run_id


def _run(state: State, caller: Caller, run_id: str) -> dict[str, Any]:
    run = studio_reads(state).run_doc(caller.tenant, run_id)  # 404 run_not_found
    check(state, caller.principal, caller.tenant, run["project_slug"])  # the run is named in the body: no guard
    return run


def _run_facts(run: dict[str, Any]) -> list[str]:
    sessions = list(run.get("sessions", {}).values())
    by_status: dict[str, int] = {}
    for s in sessions:
        by_status[s.get("live_status", "")] = by_status.get(s.get("live_status", ""), 0) + 1
    return [
        f"Run {run['run_id']} of project {run['project_slug']} ({run.get('template_id', '')}) is {run.get('status', '')}.",
        f"Next goal: {run.get('next_goal', '') or 'none recorded'}.",
        f"{len(sessions)} session(s): " + (", ".join(f"{n} {k}" for k, n in sorted(by_status.items())) or "none") + ".",
        f"Blockers: {run.get('blocker_count', 0)}; handoffs: {run.get('handoff_count', 0)}; "
        f"control verbs: {run.get('control_count', 0)}.",
        f"Launched {run.get('created_at', '')}, last activity {run.get('latest_activity_at', '')}.",
    ]


def _explain(state: State, caller: Caller, data: PortalCopilotActionIn) -> list[str]:
    v = viewer(state, caller)
    facts = [
        f"You are on {data.page_path} (surface {data.surface_key}) as {v.subject_key}.",
        f"You can read {len(v.projects)} project(s)"
        + (": " + ", ".join(f"{s} as {r}" for s, r in sorted(v.roles.items())) if v.roles else "") + ".",
    ]
    if data.entity_ref.startswith("project:"):
        slug = data.entity_ref.removeprefix("project:")
        doc = next((p for p in v.projects if p["project_slug"] == slug), None)
        if doc is None:
            facts.append(f"Project {slug} is not one you may read.")
        else:
            bindings = ", ".join(f"{b['repository_key']} ({b['vcs_repo_slug']})" for b in doc["repository_bindings"])
            facts.append(f"Project {slug}: repositories {bindings or 'none'}; "
                         f"provisioning {doc.get('vcs_repo_provision_status') or 'not started'}.")
    if data.interaction_manifest:
        facts.append("This page offers: " + ", ".join(i.label for i in data.interaction_manifest[:10]) + ".")
    return facts


def _followup(state: State, caller: Caller, data: PortalCopilotActionIn) -> tuple[list[str], list[dict[str, Any]]]:
    run = _run(state, caller, _run_id(data))
    sessions = [run["sessions"][a] for a in run.get("session_order", []) if a in run.get("sessions", {})]
    wanted = str(data.payload.get("session_id") or data.draft_target_id or "")
    target = next((s for s in sessions if s["session_id"] == wanted), None) or next(
        (s for s in sessions if s.get("live_status") == "blocked"), sessions[0] if sessions else None)
    if target is None:
        raise ApiError(409, f"Run {run['run_id']} has no session to attach a follow-up task to.", "no_session")
    title = (data.selected_text or data.instruction_notes or f"Follow up: {run.get('next_goal', '')}").strip()[:200]
    intent = {
        "kind": "intent", "intent": "create_followup_task", "requires_confirmation": True, "method": "POST",
        "url": f"/control-plane/studio/runs/{run['run_id']}/sessions/{target['session_id']}/control",
        "body": {"verb": "create_followup_task", "title": title},
        "run_id": run["run_id"], "session_id": target["session_id"], "agent_id": target.get("agent_id", ""),
    }
    facts = [f"Drafted a follow-up task {title!r} for {target.get('agent_id', '')} in run {run['run_id']}.",
             "Confirm it to send the create_followup_task control verb (needs maintainer or owner)."]
    return facts, [intent]


def _ui_actions(data: PortalCopilotActionIn) -> tuple[list[str], list[ToolCall]]:
    notes = data.instruction_notes.lower()
    ranked = sorted(data.interaction_manifest,
                    key=lambda i: (-(notes != "" and i.label.lower() in notes), -i.priority, i.id))
    calls = [
        ToolCall(id=f"call-{n + 1}", name=TOOL_BY_KIND.get(i.kind, "page.scroll"),
                 description=f"{'Fill' if i.kind in ('input', 'field') else 'Go to'} {i.label}",
                 selector=f"[data-copilot-id=\"{i.id}\"]", value=i.value_hint if i.kind in ("input", "field") else "",
                 policy_reason="proposed only: the page performs it when the user accepts")
        for n, i in enumerate(ranked[:5])
    ]
    facts = [f"{len(calls)} action(s) proposed from {len(data.interaction_manifest)} manifest item(s)."]
    return facts + [c.description for c in calls], calls


def _thread(state: State, caller: Caller, thread_id: str) -> CopilotThread:
    store = event_store(state)
    if thread_id:
        thread = store.get_or_none(thread_key(caller.tenant, thread_id)) if is_valid_id(thread_id) else None
        if thread is None or thread.subject_key != caller.subject_key:
            raise ApiError(404, f"No copilot thread {thread_id!r} of yours.", "thread_not_found")
        return thread
    return CopilotThread(tenant=caller.tenant, thread_id=new_id("thr"), subject_key=caller.subject_key, at=utc_now_iso())


RUN_ACTIONS = ("summarize_run", "draft_followup_task")


def action_body(components: Any) -> dict[str, Any]:
    """The action's schema, plus what ``_run_id`` checks: an action on a run names it."""
    _, build = refined_body("PortalCopilotActionIn", action_id={"enum": list(ACTIONS)})
    body = build(components)
    run_action = {"enum": list(RUN_ACTIONS)}
    run_id = {"type": "string", "minLength": 1}
    # Exclusive cases, each naming its action: a schema-valid body fits exactly one.
    body["oneOf"] = [
        {"properties": {"action_id": {"enum": [a for a in ACTIONS if a not in RUN_ACTIONS]}}},
        {"required": ["entity_ref"], "properties": {"action_id": run_action, "entity_ref": {"pattern": "^run:."}}},
        {
            "required": ["payload"],
            "properties": {
                "action_id": run_action,
                "entity_ref": {"not": {"pattern": "^run:"}},
                "payload": {"required": ["run_id"], "properties": {"run_id": run_id}},
            },
        },
    ]
    return body


@command(
    "/copilot/actions",
    status_code=200,
    request_max_body_size=MAX_BODY_BYTES,
    summary="Run a copilot action",
    opt=answers(401, 403, 404, 409, 422, body=("PortalCopilotActionIn", action_body)),
)
def copilot_action(
    data: JSONBody[PortalCopilotActionIn], state: State, caller: CallerDep
) -> PortalCopilotMessageOut:
    if data.action_id not in ACTIONS:
        raise RequestInvalid(["body", "action_id"], f"action_id must be one of {', '.join(ACTIONS)}", "enum",
                             data.action_id, {"expected": list(ACTIONS)})
    thread = _thread(state, caller, data.thread_id)
    tool_calls: list[ToolCall] = []
    artifacts: list[dict[str, Any]] = []
    if data.action_id == "explain_page":
        facts = _explain(state, caller, data)
    elif data.action_id == "summarize_run":
        facts = _run_facts(_run(state, caller, _run_id(data)))
    elif data.action_id == "draft_followup_task":
        facts, artifacts = _followup(state, caller, data)
    else:
        facts, tool_calls = _ui_actions(data)
    answerer = part(state, "copilot_answerer") if "copilot_answerer" in state else ComposedAnswerer()
    try:
        message, answered_by = answerer.answer(data.action_id, facts, data.instruction_notes), answerer.name
    except Exception as exc:  # the model proxy failing still answers, from the read models
        log.warning("copilot_model_failed", error=repr(exc))
        fallback = ComposedAnswerer()
        message, answered_by = fallback.answer(data.action_id, facts, data.instruction_notes), fallback.name
    thread.record_turn(
        action_id=data.action_id, question=msgspec.to_builtins(data), message=message,
        tool_calls=msgspec.to_builtins(tool_calls), ui_artifacts=artifacts, answered_by=answered_by, at=utc_now_iso(),
    )
    event_store(state).save(thread)
    out = PortalCopilotMessageOut(
        thread_id=thread.thread_id, message=message, tool_calls=tool_calls, ui_artifacts=artifacts,
        capabilities=[Capability(action_id=a, label=label) for a, label in ACTIONS.items()],
    )
    return out
