"""A whole squad run on the local plane, driven through the HTTP API, on SQLite and PostgreSQL.

Every agent is a real subprocess (the stand-in CLI) in its own git worktree. The planner
speaks Claude Code stream-json and hands off through the squad's MCP server; the curator
speaks Codex JSONL and crashes mid-stream; the frontend lane stalls before its first tool
and is restarted in the same worktree; the lanes open pull requests. The feed must show
exactly what the CLIs reported: their metrics, their tools and their LLM session ids.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import eventually
from tests.integration.local_support import served, worktree_list

PLANNER_RESULT = {"total_cost_usd": 0.0421, "duration_ms": 5123, "num_turns": 4}
BACKEND_RESULT = {"total_cost_usd": 0.31, "duration_ms": 20000, "num_turns": 9}
FRONTEND_RESULT = {"total_cost_usd": 0.2, "duration_ms": 7000, "num_turns": 5}

PLAN: dict[str, list[dict[str, Any]]] = {
    "planner": [{"format": "claude", "session": "5f0c2a9e-planner-1", "steps": [
        ["text", "Splitting the work scope into lane issues."],
        ["tool", "Read", {"file_path": "README.md"}],
        ["squad", "handoff_agent", {"target_agent_id": "backend", "message": "Build the orders API"}],
        ["squad", "handoff_agent", {"target_agent_id": "frontend", "message": "Build the orders page"}],
        ["squad", "comment_agent", {"target_agent_id": "curator", "message": "Please map the design system"}],
        ["squad", "handoff_agent", {"target_agent_id": "planner", "message": "to myself"}],
        ["garbage", "<<this line is not JSON>>"],
        ["stderr", "planner: rate limit warning"],
        ["result", PLANNER_RESULT],
    ]}],
    "curator": [
        {"format": "codex", "session": "thread-curator-1", "steps": [
            ["tool", "shell", {"command": "ls"}],
            ["text", "Mapping source references."],
            ["stderr", "curator: out of memory"],
            ["exit", 3],
        ]},
        {"format": "codex", "session": "thread-curator-2", "steps": [
            ["tool", "shell", {"command": "git status"}],
            ["tool", "mcp__squadops__report", {"status": "ok", "summary": "evidence pack ready"}],
            ["text", "Evidence pack ready."],
            ["result", {}],
        ]},
    ],
    "backend": [{"format": "claude", "session": "b4c1-backend-1", "steps": [
        ["tool", "Edit", {"file_path": "orders.py"}],
        ["commit", "orders.py", "ORDERS = []\n"],
        ["squad", "open_pull_request", {"title": "Orders API"}],
        ["result", BACKEND_RESULT],
    ]}],
    "frontend": [
        {"format": "claude", "session": "f7-frontend-1", "steps": [["hang", 60]]},
        {"format": "claude", "session": "f7-frontend-2", "steps": [
            ["tool", "Write", {"file_path": "orders.html"}],
            ["scratch", "orders.html", "<h1>Orders</h1>\n"],
            # Nothing committed yet: the squad's server refuses an empty pull request.
            ["squad", "open_pull_request", {"title": "Too early"}],
            ["commit", "orders.html", "<h1>Orders</h1>\n"],
            ["squad", "open_pull_request", {"title": "Orders page"}],
            ["result", FRONTEND_RESULT],
        ]},
    ],
}


def by_agent(feed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["agent_id"]: a for a in feed["pixel_agents"]}


def logs(feed: dict[str, Any], agent_id: str, source: str = "sandbox/runner-stdout") -> list[str]:
    return [e["message"] for e in feed["runtime_logs"] if e["agent_id"] == agent_id and e["source"] == source]


def tools(feed: dict[str, Any], agent_id: str) -> list[str]:
    """The agent's tool calls in the order it made them (live events come newest first)."""
    return [e["tool_name"] for e in reversed(feed["live_events"])
            if e["agent_id"] == agent_id and e["event_name"] in ("tool_called", "controller_action_observed")]


def test_a_squad_of_real_processes_shows_exactly_what_the_clis_reported(database_url: str, tmp_path: Path) -> None:
    proxy = {"model_proxy_base_url": "https://models.example/v1", "model_proxy_token": "proxy-token-1"}
    with served(database_url, tmp_path / "data", PLAN, local_first_tool_seconds=2.0, **proxy) as svc:
        run_id = svc.launch()
        svc.wait_status(run_id, "planner", "session_completed")
        svc.wait_status(run_id, "backend", "session_completed")
        svc.wait_status(run_id, "frontend", "session_completed")
        curator = svc.wait_status(run_id, "curator", "blocked")
        assert curator["blocker_code"] == "agent_process_exited"

        # Session ids are the CLIs' own: Claude's session_id, Codex's thread_id.
        state = svc.sessions(run_id)
        assert {a: s["llm_session_id"] for a, s in state.items()} == {
            "planner": "5f0c2a9e-planner-1", "curator": "thread-curator-1",
            "backend": "b4c1-backend-1", "frontend": "f7-frontend-2",
        }
        feed = eventually(lambda: (f := svc.feed(run_id)) and "Retry" in by_agent(f)["curator"]["wall"]["message"] and f)
        agents = by_agent(feed)
        # Metrics exactly as the result lines reported them; Codex reports none (-1, never invented).
        assert agents["planner"]["process_metrics"] == PLANNER_RESULT
        assert agents["backend"]["process_metrics"] == BACKEND_RESULT
        assert agents["frontend"]["process_metrics"] == FRONTEND_RESULT
        assert agents["curator"]["process_metrics"] == {"total_cost_usd": 0.0, "duration_ms": -1, "num_turns": -1}
        assert feed["run_cost"]["total_cost_usd"] == round(0.0421 + 0.31 + 0.2, 6)

        # Tools as the streams named them, the squad's MCP tools included.
        assert tools(feed, "planner") == [
            "Read", "mcp__squadops__handoff_agent", "mcp__squadops__handoff_agent", "mcp__squadops__comment_agent",
        ]
        # The handoff the server refused is a failed call: counted apart, shown at warn with its reason.
        refused = [e for e in feed["live_events"] if e["agent_id"] == "planner" and e["event_name"] == "tool_call_failed"]
        assert [e["tool_name"] for e in refused] == ["mcp__squadops__handoff_agent"]
        assert (state["planner"]["tool_call_count"], state["planner"]["failed_tool_call_count"]) == (4, 1)
        assert agents["planner"]["failed_tool_call_count"] == 1 and "failed_tool_call_count" not in agents["backend"]
        warned = [e for e in feed["runtime_logs"] if e["agent_id"] == "planner" and e["level"] == "warn"
                  and "mcp__squadops__handoff_agent failed" in e["message"]]
        assert warned and "handoff_to_self" in warned[0]["message"]
        # The model each CLI ran, beside the assigned alias: the stand-in's Claude says it; Codex names none.
        assert (agents["planner"]["model_ran"], state["planner"]["model_ran"]) == ("standin-model", "standin-model")
        assert agents["planner"]["agent_process_model"] != "standin-model" and "model_ran" not in agents["curator"]
        assert tools(feed, "backend") == ["Edit", "mcp__squadops__open_pull_request"]
        assert tools(feed, "curator")[:1] == ["shell"]
        assert agents["planner"]["armory_loadout"]["tool_names"]["squadops"] == [
            "mcp__squadops__comment_agent", "mcp__squadops__handoff_agent",
        ]
        # The granted handoffs created the lanes; the one to itself was refused by the server.
        trail = [(e["agent_id"], e["target_agent_id"]) for e in feed["live_events"] if e["event_name"] == "handed_off"]
        assert sorted(trail) == [("planner", "backend"), ("planner", "frontend")]
        assert any("handoff_to_self" in m for m in logs(feed, "planner", "studio/activity"))
        assert feed["delivery"]["status"] == "delivered"
        assert feed["delivery"]["pr_url"].startswith("https://vcs.squadops.local/acme/")

        # Garbage, stderr and a crash are runtime logs; the ticker lived on.
        planner_logs = logs(feed, "planner")
        assert any("malformed stream line" in m and "<<this line is not JSON>>" in m for m in planner_logs)
        assert any("[stderr] planner: rate limit warning" in m for m in planner_logs)
        stderr = [e for e in feed["runtime_logs"] if e["agent_id"] == "planner" and "[stderr]" in e["message"]]
        assert stderr and {e["level"] for e in stderr} == {"warn"}  # a CLI's stderr is shown at warn
        crash = [e for e in feed["runtime_logs"] if e["agent_id"] == "curator" and "exited with code 3" in e["message"]
                 and e["current_signal"] == "runner:exit"]
        # The wall says what happened: how it exited, and after how long.
        assert "(exited with code 3 after " in agents["curator"]["wall"]["message"]
        assert crash and crash[0]["level"] == "error" and "curator: out of memory" in crash[0]["message"]
        assert agents["curator"]["wall"]["recommended_action"] == "retry_prompt"

        # No empty pull requests: the first call was refused, naming the uncommitted file; the
        # recorded one names the commit it proposes and its changed paths.
        # (a refused call is a failed call: its line is the agent's activity, at warn, with the reason)
        refused = [m for m in logs(feed, "frontend", "studio/activity")
                   if "Too early" in m or "has no change against its base" in m]
        assert refused and "orders.html" in refused[-1] and "not committed" in refused[-1], logs(feed, "frontend")
        assert by_agent(feed)["frontend"]["failed_tool_call_count"] >= 1
        opened = [e for e in feed["runtime_logs"] if e["agent_id"] == "frontend" and "opened pull request" in e["message"]]
        frontend_head = subprocess.run(["git", "-C", str(svc.repository("frontend")), "rev-parse",
                                        f"squad/{run_id}/frontend"], capture_output=True, text=True, check=True).stdout
        assert len(opened) == 1 and f"at {frontend_head[:12]} (1 changed file)" in opened[0]["message"]

        # The stalled frontend was blocked on its first tool, then restarted in the same worktree.
        walls = logs(feed, "frontend", "sandbox/wall")
        assert any("agent_first_tool_required" in m for m in walls)
        frontend_tree = svc.worktree(run_id, "frontend")
        briefs = sorted(p.name for p in (frontend_tree / ".standin").glob("brief-*.txt"))
        assert briefs == ["brief-1.txt", "brief-2.txt"]
        assert "Build the orders page" in (frontend_tree / ".standin" / "brief-1.txt").read_text()

        # What the real process got: its identity and the model proxy from the settings in its
        # environment, its worktree on branch squad/<run_id>/<agent_id>, the squad's MCP config.
        seen = json.loads((frontend_tree / ".standin" / "env-2.json").read_text())
        # Of SQUADOPS_* only its ids; the model endpoint as the sandbox shows it (port 443 cannot
        # be listened on inside, so a spare one; the name resolves to loopback, TLS names match).
        assert {k: v for k, v in seen.items() if k.startswith("SQUADOPS_")} == {
            "SQUADOPS_RUN_ID": run_id, "SQUADOPS_SESSION_ID": state["frontend"]["session_id"],
            "SQUADOPS_AGENT_ID": "frontend",
        }
        assert (seen["ANTHROPIC_BASE_URL"], seen["ANTHROPIC_AUTH_TOKEN"]) == (
            "https://models.example:20000/v1", "proxy-token-1")
        confinement = svc.sessions(run_id)["frontend"]["confinement"]
        assert confinement["kind"] == "bwrap" and str(frontend_tree.resolve()) in confinement["writable_paths"]
        assert confinement["reachable_addresses"] == [f"127.0.0.1:{svc.http.base_url.port}", "models.example:443"]
        assert by_agent(svc.feed(run_id))["frontend"]["armory_loadout"]["confinement"] == confinement
        head = subprocess.run(["git", "-C", str(frontend_tree), "rev-parse", "--abbrev-ref", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert head == f"squad/{run_id}/frontend"
        argv = json.loads((frontend_tree / ".standin" / "argv-2.json").read_text())
        assert "--mcp-config" in argv

        # The operator follows the wall: retry_prompt starts the curator again, briefed with its mailbox.
        svc.verb(run_id, state["curator"]["session_id"], {"verb": "retry_prompt", "reason": "after the crash"})
        svc.wait_status(run_id, "curator", "session_completed")
        eventually(lambda: svc.run_status(run_id) == "completed")
        final = by_agent(svc.feed(run_id))
        assert svc.sessions(run_id)["curator"]["llm_session_id"] == "thread-curator-2"
        # Codex reports tokens only (its turn's usage); cost, duration and turns stay unknown.
        assert final["curator"]["process_metrics"] == {
            "total_cost_usd": 0.0, "duration_ms": -1, "num_turns": -1,
            "input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 340,
        }
        assert tools(svc.feed(run_id), "curator") == ["shell", "agent_mailbox", "shell", "mcp__squadops__report"]
        curator_dir = svc.data_dir / "agents" / "default" / run_id / "curator"
        assert "## Mailbox\n- Please map the design system" in (curator_dir / "home" / "standin-brief-2.txt").read_text()

        # The run ended: its worktrees are gone; the lanes' branches keep what was committed.
        # (A worktree's folder goes first, then the agent's repository: both are waited for.)
        eventually(lambda: not svc.worktree(run_id, "planner").exists() and not svc.worktree(run_id, "curator").exists())
        eventually(lambda: not (svc.data_dir / "agent-repos" / "default" / run_id).exists())
        for key in ("assembly", "backend", "frontend"):
            assert worktree_list(svc.repository(key)) == [str(svc.repository(key).resolve())]
        transcript = (curator_dir / "attempt-2.jsonl").read_text()
        assert '"thread_id": "thread-curator-2"' in transcript and (curator_dir / "mcp.json").exists()
