"""Whole runs with the real Claude Code and Codex CLIs from npm, on SQLite and PostgreSQL.

Only the model is scripted (``scripted_models``): each CLI is started by the local plane
with its default command line (C22), reaches the squad's MCP server at the address the
service listens on, writes a file with its own tool, commits it with git, and hands off
or opens a pull request. What the feed shows must be what the CLIs printed, and the work
must be on the agents' branches in the project's repositories.
"""

from __future__ import annotations

import json
from typing import Any

from tests.helpers import eventually
from tests.integration.real_clis import git, launch, real_squad, show
from tests.integration.scripted_models import ScriptedModels

SCRIPTS = {
    # Claude Code (the planner is assigned to it before the run executes).
    "planner": [
        ("write", "PLAN.md", "# Orders\n- backend: the orders API\n"),
        ("shell", "git add PLAN.md && git commit -m 'Plan the orders slice'"),
        ("squad", "handoff_agent", {"target_agent_id": "backend", "message": "Build the orders API"}),
        ("say", "Planned; the backend lane has the API."),
    ],
    # Codex (the template's provider).
    "curator": [
        ("write", "SOURCES.md", "orders: none yet\n"),
        ("shell", "git add SOURCES.md && git commit -m 'Map the sources'"),
        ("say", "Sources mapped."),
    ],
    "backend": [
        ("write", "orders.py", "ORDERS: list[dict] = []\n"),
        # Nothing committed yet: the squad's server refuses the pull request and says why.
        ("squad", "open_pull_request", {"title": "Too early"}),
        ("shell", "git add orders.py && git commit -m 'Orders API'"),
        ("squad", "open_pull_request", {"title": "Orders API"}),
        ("say", "Opened the pull request."),
    ],
}


def transcript_lines(svc: Any, run_id: str, agent_id: str) -> list[dict[str, Any]]:
    folder = svc.data_dir.resolve() / "agents" / "default" / run_id / agent_id
    lines = []
    for path in sorted(folder.glob("attempt-*.jsonl")):
        for raw in path.read_text().splitlines():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                continue
    return lines


def test_real_clis_deliver_committed_work(database_url: str) -> None:
    with ScriptedModels(SCRIPTS) as models, real_squad(database_url, models.url) as svc:
        run_id = launch(svc, {"planner": "claude-code-cli"})
        for agent in ("planner", "curator", "backend"):
            svc.wait_status(run_id, agent, "session_completed", "blocked", timeout=120)
        state = svc.sessions(run_id)
        assert {a: state[a]["live_status"] for a in ("planner", "curator", "backend")} == dict.fromkeys(
            ("planner", "curator", "backend"), "session_completed"), state

        # Each file is committed on the agent's branch, by the agent's own git commit, in its own
        # repository; the plane brings each branch into the lane's repository once the process
        # has ended (or sooner, when it reads the branch for a pull request).
        assembly, backend = svc.repository("assembly"), svc.repository("backend")
        eventually(lambda: show(assembly, f"squad/{run_id}/planner", "PLAN.md") == "# Orders\n- backend: the orders API\n")
        eventually(lambda: show(assembly, f"squad/{run_id}/curator", "SOURCES.md") == "orders: none yet\n")
        eventually(lambda: show(backend, f"squad/{run_id}/backend", "orders.py") == "ORDERS: list[dict] = []\n")
        assert git(backend, "log", "-1", "--format=%s%n%ae", f"squad/{run_id}/backend") == (
            "Orders API\nbackend@agents.squadops.local")

        # Session ids are the CLIs' own, as their transcripts printed them.
        planner_lines = transcript_lines(svc, run_id, "planner")
        init = next(line for line in planner_lines if line.get("type") == "system")
        assert state["planner"]["llm_session_id"] == init["session_id"]
        thread = next(line for line in transcript_lines(svc, run_id, "backend") if line["type"] == "thread.started")
        assert state["backend"]["llm_session_id"] == thread["thread_id"]

        # The model endpoint got the CLIs' requests, with the configured token.
        assert {s.agent for s in models.seen if s.agent} >= {"planner", "curator", "backend"}
        assert all("scripted-model-token" in s.authorization for s in models.seen)
        assert {s.api for s in models.requests_of("planner")} == {"anthropic"}
        assert {s.api for s in models.requests_of("backend")} == {"openai"}

        feed = eventually(lambda: (f := svc.feed(run_id)) and f["delivery"]["status"] == "delivered" and f, timeout=30)
        agents = {a["agent_id"]: a for a in feed["pixel_agents"]}
        result = next(line for line in planner_lines if line.get("type") == "result")
        usage = result.get("usage") or {}
        assert agents["planner"]["process_metrics"] == {
            "total_cost_usd": result["total_cost_usd"], "duration_ms": result["duration_ms"], "num_turns": result["num_turns"],
            **{k: usage[k] for k in ("input_tokens", "cached_input_tokens", "output_tokens") if isinstance(usage.get(k), int)},
        }
        # The model the CLI said it ran, beside the assigned alias.
        assert agents["planner"]["model_ran"] == state["planner"]["model_ran"] == init["model"]
        tools = [e["tool_name"] for e in reversed(feed["live_events"])
                 if e["agent_id"] == "planner" and e["event_name"] == "tool_called"]
        assert tools == ["Write", "Bash", "mcp__squadops__handoff_agent"]
        # Each call's result as the CLI printed it (Claude Code's tool_result, Codex's command
        # output), recorded with the call and shown under it on the agent's transcript page.
        commits = {a: [e.get("result", "") for e in feed["live_events"] if e["agent_id"] == a and e["tool_name"] in ("Bash", "shell")]
                   for a in ("planner", "backend")}
        assert any("Plan the orders slice" in r for r in commits["planner"]), commits
        assert any("Orders API" in r for r in commits["backend"]), commits
        page = svc.http.get(f"/runs/{run_id}/agents/planner")
        assert page.status_code == 200 and '<details class="entry-result" open>' in page.text
        assert "Plan the orders slice" in page.text.split('class="entry-result"', 1)[1]
        handoffs = [(e["agent_id"], e["target_agent_id"]) for e in feed["live_events"] if e["event_name"] == "handed_off"]
        assert handoffs == [("planner", "backend")]
        assert feed["delivery"]["pr_url"]
        # What the squad's server answered Codex, as Codex printed it: the early call refused
        # with the uncommitted file named; the accepted one names the branch and where people
        # review it, and no number the project's pages do not show.
        proposals = [e for e in reversed(feed["live_events"])
                     if e["agent_id"] == "backend" and e["tool_name"] == "mcp__squadops__open_pull_request"]
        assert [e["event_name"] for e in proposals] == ["tool_call_failed", "tool_called"], proposals
        assert "empty_pull_request" in proposals[0]["result"] and "orders.py" in proposals[0]["result"]
        answered = json.loads(proposals[1]["result"])
        assert answered["head_branch"] == f"squad/{run_id}/backend" and answered["changed_paths"] == ["orders.py"]
        assert answered["pull_requests"] == "/projects/acme/pulls" and "pr_number" not in answered

        # The gate publishes the agent's real change (and its evidence) to the project's vcs.
        answer = svc.http.post(f"/v1/admin/gate/threads/{run_id}/run",
                               json={"agent_key": "backend", "provider_key": "codex", "notes": "real CLIs"})
        assert answer.status_code == 200, answer.text
        record = answer.json()
        assert record["status"] == "published", record
        assert "orders.py" in record["publication"]["committed_paths"]
        vcs = svc.container.gate.vcs.for_tenant("default").bare(record["repo"])
        assert show(vcs, record["publication"]["head_sha"], "orders.py") == "ORDERS: list[dict] = []\n"
