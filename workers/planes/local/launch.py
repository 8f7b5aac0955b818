"""How an agent process is launched: its command line, environment and MCP config file.

The command follows the session's provider (``claude-code-cli``: Claude Code's stream-json
print mode; ``codex``: ``codex exec --json``) unless ``SQUADOPS_LOCAL_AGENT_COMMAND``
overrides it for every provider. Either way the agent is told where the squad's MCP server
is: a Claude-style program gets ``--mcp-config <file>`` (the file names the agent), a
``codex`` program gets the same server as ``-c mcp_servers.squadops.*`` overrides. The
token that names the agent to that server is in ``SQUADOPS_MCP_TOKEN``, never in a file.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domain.studio.agent_tools import SERVER
from domain.studio.brief import branch_name
from domain.studio.process import CLAUDE_CODE_CLI, CODEX

TOKEN_VARIABLE = "SQUADOPS_MCP_TOKEN"


@dataclass(frozen=True)
class LocalConfig:
    """The local plane's settings (from ``SQUADOPS_*``, read by ``workers.settings``)."""

    data_dir: Path
    base_url: str
    command: str = ""
    max_processes: int = 4
    first_tool_seconds: float = 120.0
    stop_grace_seconds: float = 5.0
    model_proxy_base_url: str = ""
    model_proxy_token: str = ""
    token_key: str = ""
    provider_fallback: str = ""

    @property
    def mcp_url(self) -> str:
        return self.base_url.rstrip("/") + "/mcp"


class MissingCommand(Exception):
    """No agent CLI can be run for the session's provider."""


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    stdin: str
    transcript: Path
    provider: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def base_command(config: LocalConfig, provider: str, model: str) -> list[str]:
    if config.command:
        return shlex.split(config.command)
    if provider == CLAUDE_CODE_CLI:
        return ["claude", "-p", "--output-format", "stream-json", "--verbose"] + (["--model", model] if model else [])
    if provider == CODEX:
        return ["codex", "exec", "--json"] + (["--model", model] if model else [])
    raise MissingCommand(
        f"No local agent CLI is known for provider {provider!r}; set SQUADOPS_LOCAL_AGENT_COMMAND "
        "to run this agent."
    )


def with_mcp(argv: list[str], config: LocalConfig, mcp_config: Path) -> list[str]:
    """The command plus the squad's MCP server, in the program's own configuration form."""
    if Path(argv[0]).name == "codex":
        return argv + [
            "-c", f"mcp_servers.{SERVER}.url={json.dumps(config.mcp_url)}",
            "-c", f"mcp_servers.{SERVER}.bearer_token_env_var={json.dumps(TOKEN_VARIABLE)}",
        ]
    return argv + ["--mcp-config", str(mcp_config), "--allowedTools", f"mcp__{SERVER}"]


def mcp_config(config: LocalConfig, run: Any, session: Any) -> dict[str, Any]:
    """Claude Code's ``--mcp-config`` document naming this agent (the token is read from env)."""
    return {
        "mcpServers": {
            SERVER: {
                "type": "http",
                "url": config.mcp_url,
                "headers": {
                    "Authorization": f"Bearer ${{{TOKEN_VARIABLE}}}",
                    "X-Squadops-Agent": f"{run.tenant}/{run.run_id}/{session.agent_id}",
                },
            }
        }
    }


def agent_env(config: LocalConfig, run: Any, session: Any, token: str, mcp_file: Path, worktree: Path) -> dict[str, str]:
    """The process environment: the machine's, minus the service's own ``SQUADOPS_*`` settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUADOPS_")}
    env.update(
        SQUADOPS_RUN_ID=run.run_id,
        SQUADOPS_SESSION_ID=session.session_id,
        SQUADOPS_AGENT_ID=session.agent_id,
        SQUADOPS_ROLE_KEY=session.role_key,
        SQUADOPS_BASE_URL=config.base_url,
        SQUADOPS_TENANT_ID=run.tenant,
        SQUADOPS_MCP_URL=config.mcp_url,
        SQUADOPS_MCP_CONFIG=str(mcp_file),
        SQUADOPS_WORKTREE=str(worktree),
        SQUADOPS_BRANCH=branch_name(run.run_id, session.agent_id),
    )
    env[TOKEN_VARIABLE] = token
    if config.model_proxy_base_url:
        env.update(
            SQUADOPS_MODEL_PROXY_BASE_URL=config.model_proxy_base_url,
            ANTHROPIC_BASE_URL=config.model_proxy_base_url,
            OPENAI_BASE_URL=config.model_proxy_base_url,
        )
    if config.model_proxy_token:
        env.update(
            SQUADOPS_MODEL_PROXY_TOKEN=config.model_proxy_token,
            ANTHROPIC_AUTH_TOKEN=config.model_proxy_token,
            OPENAI_API_KEY=config.model_proxy_token,
        )
    return env


def agent_dir(config: LocalConfig, run: Any, agent_id: str) -> Path:
    """Where the plane keeps an agent's MCP config and transcripts (outside its worktree)."""
    return config.data_dir.resolve() / "agents" / run.tenant / run.run_id / agent_id


def prepare(config: LocalConfig, run: Any, session: Any, worktree: Path, token: str, stdin: str) -> Launch:
    """Everything a launch needs; raises ``MissingCommand`` when no CLI fits the provider."""
    process = session.process or {}
    provider, model = str(process.get("provider", "")), str(process.get("model", ""))
    argv = base_command(config, provider, model)
    if not argv:
        raise MissingCommand("SQUADOPS_LOCAL_AGENT_COMMAND is empty.")
    folder = agent_dir(config, run, session.agent_id)
    folder.mkdir(parents=True, exist_ok=True)
    mcp_file = folder / "mcp.json"
    mcp_file.write_text(json.dumps(mcp_config(config, run, session), indent=2))
    mcp_file.chmod(0o600)
    return Launch(
        argv=with_mcp(argv, config, mcp_file),
        env=agent_env(config, run, session, token, mcp_file, worktree),
        cwd=worktree,
        stdin=stdin,
        transcript=folder / f"attempt-{session.process_attempt + 1}.jsonl",
        provider=provider,
    )
