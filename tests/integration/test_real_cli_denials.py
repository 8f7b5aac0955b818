"""Calls the real CLI refuses (Claude Code's permissions) are counted apart, never the first
tool, and wall the session with ``agent_permission_denied`` naming the tool (the CLI from
npm, a scripted model).

Codex's refusals are parsed from its --json stream (tests/unit/test_agent_stream.py), but
the real Codex 0.169 leaves a failed command out of that stream now and then (its session
file under CODEX_HOME has it), so a whole-run test of it would pass or fail by chance."""

from __future__ import annotations

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
