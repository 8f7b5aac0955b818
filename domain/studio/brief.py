"""The brief an agent process is started with (written to its stdin): pure text from the
run and the session: mission, next goal, the handoff that brought it in, its mailbox."""

from __future__ import annotations

from typing import Any

from domain.studio import agent_tools


def branch_name(run_id: str, agent_id: str) -> str:
    """The git branch of an agent's worktree."""
    return f"squad/{run_id}/{agent_id}"


def brief(run: Any, session: Any) -> str:
    who = getattr(session, "alias", "") or session.agent_id
    lines = [
        f"You are {who} (agent `{session.agent_id}`, role {session.role_key}) of squad run "
        f"{run.run_id} for project {run.project_slug}.",
        f"You work in your own git worktree on branch {branch_name(run.run_id, session.agent_id)}; "
        "commit your work there.",
        "",
        "## Mission",
        getattr(session, "mission_brief", "") or getattr(session, "title", "") or "(none given)",
        "",
        "## Work scope",
        run.work_scope or "(none given)",
        "",
        "## Next goal",
        getattr(session, "next_goal", "") or run.next_goal or "(none given)",
    ]
    joined = session.joined_via or {}
    if joined.get("from_agent_id") or joined.get("reason"):
        lines += ["", f"## Handoff from {joined.get('from_agent_id') or 'the operator'}", joined.get("reason", "")]
    suit = session.suit or {}
    if suit:
        lines += ["", "## Actor suit", f"Prove the slice as {suit.get('title') or suit.get('suit_id', '')} "
                  f"(suit {suit.get('suit_id', '')})."]
    if session.last_restart_reason == "process_switch" or session.process_switch_status == "applied":
        process = session.process or {}
        lines += [
            "", "## Takeover",
            f"You take over this worktree from the agent's previous process; you run as "
            f"{process.get('provider', '')}/{process.get('model', '')}. Continue its work.",
        ]
    mailbox = list(getattr(session, "mailbox", []) or [])
    if mailbox:
        lines += ["", "## Mailbox"] + [f"- {message}" for message in mailbox]
    lines += ["", "## Squad tools (MCP server squadops)"]
    lines += [f"- {agent_tools.full_name(name)}: {description}" for name, (description, _) in agent_tools.TOOLS.items()]
    return "\n".join(lines) + "\n"
