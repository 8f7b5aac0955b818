"""Roster identities (C6), agent process defaults, and metadata read in either casing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from domain.projects.project import delivery_lanes, source_ref, suit_tester_roles
from domain.shared.metadata import camel, pick, snake
from domain.studio.squad import (
    ModelProxyAliases,
    ProcessAssignment,
    agent_nickname,
    default_assignment,
    resolve_switch,
    roster_agent,
    shipped_templates,
)

ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)


@given(ids, ids, ids)
def test_nicknames_are_deterministic_per_run_agent_and_role(run: str, agent: str, role: str) -> None:
    assert agent_nickname(run, agent, role) == agent_nickname(run, agent, role)


def test_nicknames_differ_across_runs() -> None:
    names = {agent_nickname(f"run-{i}", "planner", "role_planner") for i in range(200)}
    assert len(names) > 190


def test_roster_identity_shape() -> None:
    agent = roster_agent("run-1", "tester-admin", "role_tester", "agents.example")
    assert agent.user_principal_name == agent.subject_key == "tester@agents.example"
    assert agent.secret_lease_ref == "named-agent/tester"
    assert agent.identity_binding_mode == "named_agent_idp"
    assert agent.skill_ids == [] and agent.mcp_server_ids == []


def test_process_defaults_by_role() -> None:
    aliases = ModelProxyAliases()
    assert default_assignment("role_planner", aliases) == ProcessAssignment(
        provider="codex", model="model-proxy codex alias"
    )
    assert default_assignment("role_backend", aliases).provider == "codex"
    assert default_assignment("role_tester", aliases).provider == "antigravity"


def test_switching_to_claude_code_cli_without_a_model_takes_its_default_alias() -> None:
    aliases = ModelProxyAliases()
    current = default_assignment("role_backend", aliases)
    switched = resolve_switch(current, aliases, provider="claude-code-cli")
    assert switched.model == aliases.alias_for("claude-code-cli") == "model-proxy claude-code-cli alias"
    assert resolve_switch(current, aliases, effort="high").model == current.model
    overridden = ModelProxyAliases([("codex", "proxy/codex-next")])
    assert default_assignment("role_planner", overridden).model == "proxy/codex-next"


@given(st.from_regex(r"[a-z]+(_[a-z]+){0,3}", fullmatch=True))
def test_snake_and_camel_are_inverse(name: str) -> None:
    assert snake(camel(name)) == name


def test_metadata_reads_the_same_in_both_casings() -> None:
    camel_meta = {
        "projectRepositoryBindings": [{"repositoryKey": "backend"}, {"repositoryKey": "frontend"}],
        "sourceRefRepos": [{"slug": "acme/ds"}],
        "agentSquadSuitTesterRoles": ["admin"],
    }
    snake_meta = {
        "project_repository_bindings": [{"repository_key": "backend"}, {"repository_key": "frontend"}],
        "source_ref_repos": [{"slug": "acme/ds"}],
        "agent_squad_suit_tester_roles": ["admin"],
    }
    for meta in (camel_meta, snake_meta):
        assert delivery_lanes(meta) == ["backend", "frontend"]
        assert source_ref(meta)["mode"] == "github_array" and source_ref(meta)["hud_shared"]
        assert [s["suit_id"] for s in suit_tester_roles(meta)] == ["admin"]
    assert pick({"sourceRefRepos": []}, "source_ref_repos") == []


def test_source_ref_mode_priority() -> None:
    assert source_ref({"source_ref_oci": {"artifact": "a", "version": "1"}, "source_ref_repos": ["x"]})["mode"] == "oci"
    assert source_ref({"source_ref_bundle": "free text", "source_ref_repos": ["x"]})["mode"] == "github_array"
    assert source_ref({"source_ref_bundle": "free text"})["mode"] == "bundle"
    bundle = source_ref({"source_ref_bundle": "free text"})
    assert bundle["hud_shared"] is False
    assert source_ref({})["mode"] == "none"


def test_assembly_is_never_a_delivery_lane() -> None:
    meta = {"repository_bindings": [{"repository_key": "assembly", "repository_type": "assembly"}, {"repository_key": "contract"}]}
    assert delivery_lanes(meta) == ["contract"]


def test_shipped_templates() -> None:
    core = shipped_templates().get("delivery-core")
    assert core is not None
    assert core.default_agent_ids == ["planner", "curator"]
    for agent_id in core.default_agent_ids + core.conditional_agent_ids:
        assert core.spec(agent_id) is not None, agent_id
    tester = core.spec("tester")
    assert tester is not None and tester.test_tracks and tester.provider == "antigravity"
