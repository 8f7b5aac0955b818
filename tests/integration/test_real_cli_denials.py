"""Calls the real CLIs refuse (Claude Code's permissions, Codex's sandbox) are counted apart,
never the first tool, and wall the session with ``agent_permission_denied`` naming the tool
(the CLIs from npm, a scripted model)."""

from __future__ import annotations

from tests.helpers import eventually
from tests.integration.real_clis import launch, real_squad
from tests.integration.scripted_models import ScriptedModels

SCRIPTS = {
    # Claude Code: a command its settings deny (no blanket bypass), then the turn ends.
    "planner": [
        ("shell", "curl -s http://127.0.0.1:9/exfiltrate"),
        ("say", "The command was denied."),
    ],
}


def test_a_call_the_real_cli_denies_is_counted_apart_and_walls_the_session(sqlite_url: str) -> None:
    with ScriptedModels(SCRIPTS) as models, real_squad(sqlite_url, models.url) as svc:
        run_id = launch(svc, {"planner": "claude-code-cli"})
        planner = svc.wait_status(run_id, "planner", "blocked", timeout=120)
        assert planner["blocker_code"] == "agent_permission_denied", planner
        assert (planner["tool_call_count"], planner["failed_tool_call_count"]) == (0, 1)
        feed = svc.feed(run_id)
        agent = next(a for a in feed["pixel_agents"] if a["agent_id"] == "planner")
        assert agent["wall"]["recommended_action"] == "retry_prompt" and "Bash" in agent["wall"]["message"]
        assert agent["failed_tool_call_count"] == 1 and agent["model_ran"]
        failed = [e for e in feed["runtime_logs"] if e["agent_id"] == "planner" and "Bash failed" in e["message"]]
        assert failed and failed[0]["level"] == "warn"
        assert not [e for e in feed["live_events"] if e["agent_id"] == "planner" and e["event_name"] == "tool_called"]


def test_a_write_the_real_codex_sandbox_refuses_walls_the_session_and_its_setup_notice_is_no_call(sqlite_url: str) -> None:
    scripts = {"curator": [("shell", "touch /usr/squadops-outside-the-sandbox"), ("say", "It was refused.")]}
    with ScriptedModels(scripts) as models, real_squad(sqlite_url, models.url) as svc:
        run_id = launch(svc)  # the curator runs on Codex, the template's provider

        def walled() -> dict | None:
            s = svc.sessions(run_id)["curator"]
            return s if s["blocker_code"] == "agent_permission_denied" else None

        curator = eventually(walled, timeout=120)
        # Only the refused command is a failed call: Codex's "model metadata not found" notice
        # on every start (the alias is no model it knows) is a runtime log, not a call.
        assert (curator["tool_call_count"], curator["failed_tool_call_count"]) == (0, 1), curator
        assert curator["model_ran"] == "model-proxy codex alias"  # Codex names none: the one it was given
        feed = svc.feed(run_id)
        agent = next(a for a in feed["pixel_agents"] if a["agent_id"] == "curator")
        assert "shell" in agent["wall"]["message"] and agent["wall"]["recommended_action"] == "retry_prompt"
        notices = [e for e in feed["runtime_logs"] if e["agent_id"] == "curator" and "Model metadata" in e["message"]]
        assert notices and {e["level"] for e in notices} == {"warn"}
