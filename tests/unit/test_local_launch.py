"""How the local plane launches agents: settings (C21), command lines per provider, the
MCP config naming the agent, the environment, and the bounded FIFO pool (real processes)."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from domain.shared import agent_tokens
from tests.helpers import eventually
from workers.builders import service_url
from workers.planes.local.launch import Launch, LocalConfig, MissingCommand, prepare
from workers.planes.local.process import AgentProcess, ProcessPool, process_state
from workers.planes.local.sandbox import SandboxConfig
from workers.settings import SettingsError, load_settings


def test_settings_choose_the_plane_and_bound_the_local_one() -> None:
    assert load_settings({}).execution_plane == "simulator"
    local = load_settings({
        "SQUADOPS_EXECUTION_PLANE": "local", "SQUADOPS_LOCAL_MAX_PROCESSES": "3",
        "SQUADOPS_LOCAL_AGENT_COMMAND": "claude -p --output-format stream-json --verbose",
        "SQUADOPS_MODEL_PROXY_BASE_URL": "https://proxy.example", "SQUADOPS_MODEL_PROXY_TOKEN": "t0k",
        "SQUADOPS_LOCAL_FIRST_TOOL_SECONDS": "90", "SQUADOPS_DATA_DIR": "/srv/squadops",
    })
    assert (local.execution_plane, local.local_max_processes, local.local_first_tool_seconds) == ("local", 3, 90.0)
    assert (local.model_proxy_base_url, local.model_proxy_token, local.data_dir) == (
        "https://proxy.example", "t0k", "/srv/squadops")
    for bad in ({"SQUADOPS_EXECUTION_PLANE": "sandbox"}, {"SQUADOPS_LOCAL_MAX_PROCESSES": "0"},
                {"SQUADOPS_LOCAL_AGENT_COMMAND": "claude 'unterminated"}):
        with pytest.raises(SettingsError):
            load_settings(bad)


def _run_and_session(provider: str, model: str = "") -> tuple[SimpleNamespace, SimpleNamespace]:
    run = SimpleNamespace(tenant="default", run_id="run-9", project_slug="acme")
    session = SimpleNamespace(agent_id="backend", session_id="ses-1", role_key="role_backend", process_attempt=0,
                              process={"provider": provider, "model": model})
    return run, session


def _config(tmp_path: Path, **changes: object) -> LocalConfig:
    # The CLIs' own configuration, unconfined (tests/unit/test_agent_sandbox.py has the sandbox).
    values: dict = {"data_dir": tmp_path, "base_url": "http://127.0.0.1:8000", "token_key": "k",
                    "sandbox": SandboxConfig(kind="none")} | changes
    return LocalConfig(**values)


def test_each_provider_has_its_cli_and_is_told_where_the_squad_tools_are(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQUADOPS_DATABASE_URL", "postgresql://secret@db/squadops")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-for-agents")
    run, session = _run_and_session("claude-code-cli", "sonnet")
    proxied = _config(tmp_path, model_proxy_base_url="https://proxy.example", model_proxy_token="pt",
                      allowed_commands=("tox -e py311",))
    claude = prepare(proxied, run, session, tmp_path, "tok", "brief")
    folder = tmp_path / "agents" / "default" / "run-9" / "backend"
    mcp_file = folder / "mcp.json"
    # Edits in its worktree, the squad's tools, and an explicit command allow-list (C22).
    assert claude.argv == ["claude", "-p", "--output-format", "stream-json", "--verbose", "--model", "sonnet",
                           "--mcp-config", str(mcp_file), "--permission-mode", "acceptEdits",
                           "--settings", str(folder / "claude" / "settings.json"), "--allowedTools", "mcp__squadops"]
    config = json.loads(mcp_file.read_text())["mcpServers"]["squadops"]
    assert config == {"type": "http", "url": "http://127.0.0.1:8000/mcp", "headers": {
        "Authorization": "Bearer ${SQUAD_MCP_TOKEN}", "X-Squadops-Agent": "default/run-9/backend"}}
    assert mcp_file.stat().st_mode & 0o777 == 0o600
    permissions = json.loads((folder / "claude" / "settings.json").read_text())["permissions"]
    assert {"Bash(git add:*)", "Bash(git commit:*)", "Bash(tox -e py311:*)", "mcp__squadops"} <= set(permissions["allow"])
    assert "Bash(git push:*)" in permissions["deny"] and not any(rule in ("Bash", "Bash(*)") for rule in permissions["allow"])
    assert claude.env["SQUAD_MCP_TOKEN"] == "tok" and "SQUADOPS_DATABASE_URL" not in claude.env
    assert "AWS_SECRET_ACCESS_KEY" not in claude.env  # an allow-list of the machine's variables
    # Of SQUADOPS_* only the agent's ids (issue 25).
    assert {k: v for k, v in claude.env.items() if k.startswith("SQUADOPS_")} == {
        "SQUADOPS_RUN_ID": "run-9", "SQUADOPS_SESSION_ID": "ses-1", "SQUADOPS_AGENT_ID": "backend"}
    assert claude.cwd == tmp_path and claude.confinement == {"kind": "none", "writable_paths": [],
                                                              "reachable_addresses": []}
    assert (claude.env["ANTHROPIC_BASE_URL"], claude.env["ANTHROPIC_AUTH_TOKEN"]) == ("https://proxy.example", "pt")
    # Its configuration lives in its own folder, never in the user's home; commits carry its identity.
    assert (claude.env["HOME"], claude.env["CLAUDE_CONFIG_DIR"]) == (str(folder / "home"), str(folder / "claude"))
    assert claude.env["GIT_AUTHOR_EMAIL"] == "backend@agents.squadops.local"

    run, session = _run_and_session("codex", "gpt-squad")
    git_dir = tmp_path / "repos" / "default" / "acme" / "backend.git"
    codex = prepare(proxied, run, session, tmp_path, "tok", "brief", git_dirs=[git_dir])
    assert codex.argv == ["codex", "exec", "--json", "--model", "gpt-squad"]
    assert codex.env["CODEX_HOME"] == str(folder / "codex") and codex.env["SQUAD_MODEL_TOKEN"] == "pt"
    assert "OPENAI_API_KEY" not in codex.env  # Codex reads its provider's env_key, nothing else
    toml = tomllib.loads((folder / "codex" / "config.toml").read_text())
    assert (toml["model"], toml["approval_policy"], toml["sandbox_mode"]) == ("gpt-squad", "never", "workspace-write")
    assert toml["sandbox_workspace_write"]["writable_roots"] == [str(git_dir)]
    assert toml["model_provider"] == "squadops"
    assert toml["model_providers"]["squadops"] == {
        "name": "squadops model endpoint", "base_url": "https://proxy.example/v1",
        "env_key": "SQUAD_MODEL_TOKEN", "wire_api": "responses"}
    assert toml["mcp_servers"]["squadops"] == {
        "url": "http://127.0.0.1:8000/mcp", "bearer_token_env_var": "SQUAD_MCP_TOKEN",
        "default_tools_approval_mode": "approve"}

    overridden = prepare(_config(tmp_path, command="my-agent --fast 'two words'"), run, session, tmp_path, "t", "b")
    assert overridden.argv[:3] == ["my-agent", "--fast", "two words"] and "--mcp-config" in overridden.argv
    run, tester = _run_and_session("antigravity")
    with pytest.raises(MissingCommand, match="antigravity"):
        prepare(_config(tmp_path), run, tester, tmp_path, "t", "b")


def test_agents_reach_the_service_where_it_listens() -> None:
    assert service_url(load_settings({"SQUADOPS_PORT": "8123"})) == "http://127.0.0.1:8123"
    assert service_url(load_settings({"SQUADOPS_HOST": "0.0.0.0", "SQUADOPS_PORT": "9000"})) == "http://127.0.0.1:9000"
    public = load_settings({"SQUADOPS_PORT": "9000", "SQUADOPS_PUBLIC_URL": "https://squad.example/"})
    assert service_url(public) == "https://squad.example"


def test_agent_tokens_name_one_session_and_cannot_be_forged() -> None:
    identity = agent_tokens.AgentIdentity("default", "run-1", "ses-1", "planner")
    token = agent_tokens.sign("key", identity)
    assert agent_tokens.verify("key", token) == identity
    assert agent_tokens.verify("other", token) is None
    assert agent_tokens.verify("key", token.replace("planner", "curator")) is None
    assert agent_tokens.verify("key", "garbage") is None


def _sleeper(tmp_path: Path, name: str) -> AgentProcess:
    code = "import sys, time; sys.stdin.read(); time.sleep(120)"
    return AgentProcess(Launch(argv=[sys.executable, "-c", code], env={}, cwd=tmp_path, stdin="brief",
                               transcript=tmp_path / f"{name}.jsonl"))


def test_the_pool_bounds_live_processes_and_admits_first_in_first_out(tmp_path: Path) -> None:
    pool = ProcessPool(2)
    started = {}
    for key in ("a", "b"):
        assert pool.admit(key)
        started[key] = _sleeper(tmp_path, key)
        pool.started(key, started[key])
    assert not pool.admit("c") and not pool.admit("d") and not pool.admit("c")
    assert (pool.position("c"), pool.position("d")) == (0, 1)
    started["a"].pause()
    eventually(lambda: process_state(started["a"].pid) == "T")
    started["a"].stop(grace=2.0)  # a stopped process is continued so the SIGTERM lands
    eventually(lambda: started["a"].finished)
    assert started["a"].exit_code == -15
    assert not pool.admit("d")  # one slot is free, and c asked first
    assert pool.admit("c")
    pool.cancel("d")
    assert pool.position("d") == -1 and pool.live_count() == 1
    started["b"].stop(grace=2.0)
    eventually(lambda: started["b"].finished)


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); sys.stdin.read(); "
            "print('ready', flush=True); time.sleep(120)")
    stubborn = AgentProcess(Launch(argv=[sys.executable, "-c", code], env={}, cwd=tmp_path, stdin="",
                                   transcript=tmp_path / "stubborn.jsonl"))
    eventually(lambda: stubborn.take_lines() == ["ready\n"])
    stubborn.stop(grace=0.3)
    eventually(lambda: stubborn.finished)
    assert stubborn.exit_code == -9
    assert (tmp_path / "stubborn.jsonl").read_text() == "ready\n"


def test_a_finished_process_has_had_every_stderr_line_read(tmp_path: Path) -> None:
    # Its last words go to stderr just before it exits: the plane takes them once, when the
    # process counts as finished, so "finished" must mean they were read.
    code = (
        "import os, sys; sys.stdin.read(); print('{}', flush=True); sys.stdout.close(); "
        "sys.stderr.write(''.join(f'warning {n}\\n' for n in range(5000))); sys.stderr.flush(); os._exit(3)"
    )
    for attempt in range(5):
        process = AgentProcess(Launch(argv=[sys.executable, "-c", code], env={}, cwd=tmp_path, stdin="brief",
                                      transcript=tmp_path / f"last-words-{attempt}.jsonl"))
        assert process.wait(30)
        assert process.finished and process.exit_code == 3
        errors = process.take_errors()
        assert len(errors) == 5000 and errors[-1] == "warning 4999"
