"""The real Claude Code and Codex CLIs through the service's own model proxy (issue 26, C22).

Nothing names a model endpoint: the local plane points both CLIs at ``/v1/model-proxy``
with a proxy token of each agent's own. Against scripted upstreams, the upstream sees the
mapped upstream model and the service's key (never an agent's token), and a Codex
session's cost is the price table times the tokens the upstream reported. With no upstream
at all, the built-in model leads both CLIs through a short task.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import eventually
from tests.integration.local_support import Served
from tests.integration.real_clis import launch, real_squad, show
from tests.integration.scripted_models import USAGE, ScriptedModels

PRICES = {"claude-sonnet-4-5": {"input_per_mtok": 3.0, "output_per_mtok": 15.0},
          "gpt-5-codex": {"input_per_mtok": 1.25, "output_per_mtok": 10.0}}
KEYS = {"upstream_anthropic_key": "sk-ant-service-key", "upstream_openai_key": "sk-openai-service-key"}
AGENTS = ("planner", "curator")
SCRIPTS = {
    "planner": [("write", "PLAN.md", "# Orders\n"), ("say", "Planned.")],  # Claude Code
    "curator": [("write", "SOURCES.md", "orders: none yet\n"), ("say", "Sources mapped.")],  # Codex
}


def both_complete(svc: Served) -> str:
    """Launches a run with the planner on Claude Code and the curator on Codex; both complete."""
    run_id = launch(svc, {"planner": "claude-code-cli"})
    for agent in AGENTS:
        svc.wait_status(run_id, agent, "session_completed", "blocked", timeout=120)
    state = svc.sessions(run_id)
    assert {a: state[a]["live_status"] for a in AGENTS} == dict.fromkeys(AGENTS, "session_completed"), state
    return run_id


def test_both_clis_through_the_proxy_against_scripted_upstreams(database_url: str) -> None:
    with ScriptedModels(SCRIPTS) as models, real_squad(
        database_url, "", upstream_anthropic_url=models.url, upstream_openai_url=models.url,
        model_prices=json.dumps(PRICES), **KEYS,
    ) as svc:
        run_id = both_complete(svc)

        planner, curator = models.requests_of("planner"), models.requests_of("curator")
        assert planner and curator
        assert {(s.api, s.model, s.authorization) for s in planner} == {
            ("anthropic", "claude-sonnet-4-5", "sk-ant-service-key")}
        assert {(s.api, s.model, s.authorization) for s in curator} == {
            ("openai", "gpt-5-codex", "Bearer sk-openai-service-key")}
        assert not any(s.authorization.startswith("Bearer sqp1.") or "sqp1." in s.authorization for s in models.seen)

        codex_cost = len(curator) * (USAGE["input_tokens"] * 1.25 + USAGE["output_tokens"] * 10.0) / 1e6
        feed = eventually(lambda: (f := svc.feed(run_id)) and any(
            a["agent_id"] == "curator" and a["process_metrics"]["total_cost_usd"] > 0 for a in f["pixel_agents"])
            and f["run_cost"]["metered_cost_usd"] > codex_cost and f, timeout=30)
        agents = {a["agent_id"]: a for a in feed["pixel_agents"]}
        # Codex reports no cost: its session's is the meter's, price x the upstream's tokens.
        assert agents["curator"]["process_metrics"]["total_cost_usd"] == pytest.approx(codex_cost, abs=1e-6)
        sources = {s["agent_id"]: s["source"] for s in feed["run_cost"]["cost_sources"]}
        assert sources == {"planner": "cli_report", "curator": "meter"}
        usage = svc.http.get(f"/v1/admin/usage/runs/{run_id}").json()
        by_agent = {a["agent_id"]: a for a in usage["agents"]}
        # Every Messages request of Claude Code (count_tokens is free) went through the planner's token.
        claude = [s for s in models.seen if s.api == "anthropic"]
        claude_cost = len(claude) * (USAGE["input_tokens"] * 3.0 + USAGE["output_tokens"] * 15.0) / 1e6
        assert by_agent["planner"]["cost_usd"] == pytest.approx(claude_cost, abs=1e-9)
        assert by_agent["curator"]["cost_usd"] == pytest.approx(codex_cost, abs=1e-9)
        assert by_agent["curator"]["requests"] == len(curator)
        assert feed["run_cost"]["metered_cost_usd"] == pytest.approx(usage["totals"]["cost_usd"], abs=1e-6)


def test_the_built_in_model_leads_both_clis_through_a_short_task(database_url: str) -> None:
    with real_squad(database_url, "") as svc:
        run_id = both_complete(svc)
        assembly = svc.repository("assembly")
        for agent in ("planner", "curator"):
            written = eventually(lambda a=agent: show(assembly, f"squad/{run_id}/{a}", f"NOTES-{a}.md"), timeout=30)
            assert written.startswith(f"# Notes by {agent}\n")
        feed = svc.feed(run_id)
        tools = {(e["agent_id"], e["tool_name"]) for e in feed["live_events"] if e["event_name"] == "tool_called"}
        assert ("planner", "Write") in tools and any(agent == "curator" for agent, _ in tools), tools
        usage = svc.http.get(f"/v1/admin/usage/runs/{run_id}").json()
        assert {a["agent_id"] for a in usage["agents"]} >= {"planner", "curator"}
        assert usage["totals"]["cost_usd"] == 0.0 and usage["totals"]["unpriced_requests"] == 0
