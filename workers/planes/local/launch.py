"""How an agent process is launched: its command line, environment and CLI configuration (C22).

The command follows the session's provider (``claude-code-cli``: Claude Code's stream-json
print mode; ``codex``: ``codex exec --json``), found on ``PATH``, unless
``SQUADOPS_LOCAL_AGENT_COMMAND`` overrides it for every provider. The plane writes each
agent's CLI configuration into that agent's own folder under the data dir (never into the
user's home), and points ``HOME``, ``CLAUDE_CONFIG_DIR`` and ``CODEX_HOME`` there:

- Claude Code: ``--permission-mode acceptEdits`` (edits inside its worktree), the squad's
  MCP server (``--mcp-config``), and a settings file whose permission allow-list names the
  commands a delivery agent needs (git, the project's build and test commands) — never a
  blanket bypass. Its model endpoint is ``ANTHROPIC_BASE_URL`` plus a token.
- Codex: ``config.toml`` with the ``workspace-write`` sandbox, the worktree's git metadata
  among its writable roots (so ``git commit`` works), the squad's MCP server with its
  tools approved, and a model provider built from the model endpoint settings.

The token that names the agent to the MCP server is in ``SQUAD_MCP_TOKEN``, never in a
file; the model endpoint's token is in ``SQUAD_MODEL_TOKEN`` (and ``ANTHROPIC_AUTH_TOKEN``),
in the environment only. By default the model endpoint is the service's own model proxy
and that token is the agent's own proxy token (``domain.workspaces.proxy_tokens``): no
upstream key is ever in an agent's environment. Of ``SQUADOPS_*`` the agent sees only its run, session and agent ids.

Under the sandbox (``SQUADOPS_AGENT_SANDBOX=bwrap``, the default; ``sandbox``) the command
runs inside bubblewrap, and every URL the agent is given (MCP, model endpoint) is the one
it reaches from inside: a loopback port that the sandbox forwards to the real address.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from domain.studio.agent_tools import SERVER
from domain.studio.squad import CLAUDE_CODE_CLI, CODEX, role_name
from domain.workspaces import proxy_tokens
from workers.planes.local import sandbox as sandboxing
from workers.planes.local.sandbox import SandboxConfig

TOKEN_VARIABLE = "SQUAD_MCP_TOKEN"
MODEL_TOKEN_VARIABLE = "SQUAD_MODEL_TOKEN"
PROVIDER_NAME = "squadops"
# The machine's variables an agent CLI may see (everything else of the service stays out).
PASSED_THROUGH = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
                  "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")
# The commands a delivery agent runs without asking (Claude Code permission rules).
DELIVERY_COMMANDS = (
    "git add", "git commit", "git status", "git diff", "git log", "git show", "git rm", "git mv",
    "git restore", "git switch", "git checkout", "git branch", "git stash", "git rev-parse",
    "ls", "cat", "head", "tail", "wc", "grep", "find", "mkdir", "pwd", "echo", "touch",
    "make", "pytest", "python -m pytest", "python3 -m pytest", "npm test", "npm run", "npx", "node",
    "python", "python3", "go test", "go build", "cargo test", "cargo build",
)
DENIED_COMMANDS = ("git push", "git remote", "git config", "curl", "wget", "ssh", "sudo")


@dataclass(frozen=True)
class LocalConfig:
    """The local plane's settings (from ``SQUADOPS_*``, read by ``workers.settings``)."""

    data_dir: Path
    base_url: str  # the service as agents reach it (its listening address, or SQUADOPS_PUBLIC_URL)
    vcs_root: Path | None = None  # the bindings' repositories (None: ``<data_dir>/vcs``)
    command: str = ""
    max_processes: int = 4
    first_tool_seconds: float = 120.0
    stop_grace_seconds: float = 5.0
    model_proxy_base_url: str = ""
    model_proxy_token: str = ""
    token_key: str = ""
    # With the service's own model proxy, each agent gets a proxy token of its own (signed
    # with ``token_key``, valid this long) instead of ``model_proxy_token``.
    own_model_proxy: bool = False
    model_proxy_token_seconds: float = 24 * 3600.0
    agent_domain: str = "agents.squadops.local"
    allowed_commands: tuple[str, ...] = ()
    provider_fallback: str = ""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)

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
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    sandbox: sandboxing.Plan | None = None  # None: the process runs bare (SQUADOPS_AGENT_SANDBOX=none)

    @property
    def confinement(self) -> dict[str, Any]:
        """How the process is confined, as the session record and the feed show it."""
        if self.sandbox is None:
            return sandboxing.Confinement(sandboxing.NONE).as_dict()
        return self.sandbox.confinement.as_dict()


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


def program(argv: Sequence[str]) -> str:
    """``claude``, ``codex`` or another program (a stand-in, a wrapper)."""
    return Path(argv[0]).name if argv else ""


def agent_identity(config: LocalConfig, role_key: str) -> str:
    """``<role>@<domain>``: the author of an agent's commits (C6)."""
    return f"{role_name(role_key)}@{config.agent_domain}"


# -- the CLIs' own configuration ---------------------------------------------------------------


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


def claude_settings(config: LocalConfig) -> dict[str, Any]:
    """Claude Code settings: edits in the worktree, the squad's tools, an explicit command list."""
    commands = tuple(dict.fromkeys(DELIVERY_COMMANDS + config.allowed_commands))
    return {
        "permissions": {
            "defaultMode": "acceptEdits",
            "allow": [f"Bash({command}:*)" for command in commands] + [f"mcp__{SERVER}"],
            "deny": [f"Bash({command}:*)" for command in DENIED_COMMANDS],
        },
        "includeCoAuthoredBy": False,
    }


def _toml(value: Any) -> str:
    """A TOML value (strings as JSON strings, which TOML's basic strings accept)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))


def codex_config(config: LocalConfig, model: str, writable_roots: Sequence[Path]) -> str:
    """Codex's ``config.toml``: workspace-write with the git metadata writable, the squad's MCP
    server with its tools approved, and the model endpoint as a provider."""
    tables: list[tuple[str, dict[str, Any]]] = []
    top: dict[str, Any] = {"approval_policy": "never", "sandbox_mode": "workspace-write"}
    if model:
        top["model"] = model
    if config.model_proxy_base_url:
        top["model_provider"] = PROVIDER_NAME
        tables.append((f"model_providers.{PROVIDER_NAME}", {
            "name": "squadops model endpoint",
            "base_url": config.model_proxy_base_url.rstrip("/") + "/v1",
            "env_key": MODEL_TOKEN_VARIABLE,
            "wire_api": "responses",
        }))
    tables.append(("sandbox_workspace_write", {"writable_roots": [str(p) for p in writable_roots]}))
    tables.append((f"mcp_servers.{SERVER}", {
        "url": config.mcp_url,
        "bearer_token_env_var": TOKEN_VARIABLE,
        "default_tools_approval_mode": "approve",
    }))
    lines = [f"{key} = {_toml(value)}" for key, value in top.items()]
    for name, values in tables:
        lines += ["", f"[{name}]"] + [f"{key} = {_toml(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)


def with_configuration(argv: list[str], config: LocalConfig, folder: Path) -> list[str]:
    """The command plus what it needs to find the squad's tools, in the program's own form."""
    name = program(argv)
    if name == "codex":
        return argv  # everything is in $CODEX_HOME/config.toml
    tail = ["--mcp-config", str(folder / "mcp.json")]
    if name == "claude":
        tail += ["--permission-mode", "acceptEdits", "--settings", str(folder / "claude" / "settings.json")]
    return argv + tail + ["--allowedTools", f"mcp__{SERVER}"]


# -- environment -------------------------------------------------------------------------------


def model_token(config: LocalConfig, run: Any, session: Any, now: float) -> str:
    """The agent's model-proxy token: its own, naming its tenant, project, run, session and
    agent, when the service's own proxy is its model endpoint; else the configured one."""
    if not config.own_model_proxy:
        return config.model_proxy_token
    caller = proxy_tokens.ProxyCaller(run.tenant, run.project_slug, run.run_id, session.session_id, session.agent_id)
    return proxy_tokens.sign(config.token_key, caller, int(now + config.model_proxy_token_seconds))


def agent_env(config: LocalConfig, run: Any, session: Any, token: str, folder: Path, worktree: Path,
              model_token: str = "") -> dict[str, str]:
    """The process environment: an allow-list of the machine's, the agent's ids, its own
    configuration folders, its git author, its MCP token and the model endpoint."""
    env = {k: v for k, v in os.environ.items() if k in PASSED_THROUGH}
    author = agent_identity(config, session.role_key)
    env.update(
        HOME=str(folder / "home"),
        CLAUDE_CONFIG_DIR=str(folder / "claude"),
        CODEX_HOME=str(folder / "codex"),
        TMPDIR=str(folder / "tmp"),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        GIT_AUTHOR_NAME=author, GIT_AUTHOR_EMAIL=author,
        GIT_COMMITTER_NAME=author, GIT_COMMITTER_EMAIL=author,
        SQUADOPS_RUN_ID=run.run_id,
        SQUADOPS_SESSION_ID=session.session_id,
        SQUADOPS_AGENT_ID=session.agent_id,
    )
    env[TOKEN_VARIABLE] = token
    if config.model_proxy_base_url:
        env.update(ANTHROPIC_BASE_URL=config.model_proxy_base_url.rstrip("/"))
    model_token = model_token or config.model_proxy_token
    if model_token:
        env.update({MODEL_TOKEN_VARIABLE: model_token, "ANTHROPIC_AUTH_TOKEN": model_token})
    return env


def git_controls(git_dirs: Sequence[Path]) -> list[Path]:
    """The parts of the agent's repository that decide what git runs (its configuration: filter
    drivers, textconv, fsmonitor; its hooks) and which object stores it reads (``objects/info``,
    where ``alternates`` would lend it another repository's objects), read-only inside the
    sandbox: the plane runs git on the host in that repository. (``objects/info`` goes with
    its folder when the agent renames ``objects``: ``agent_repos`` never relies on it.)"""
    repo = git_dirs[0] if git_dirs else None
    if repo is None:
        return []
    (repo / "objects" / "info").mkdir(parents=True, exist_ok=True)  # (git makes it; were it gone, the agent could)
    return [repo / name for name in ("config", "hooks", "objects/info") if (repo / name).exists()]


def agent_dir(config: LocalConfig, run: Any, agent_id: str) -> Path:
    """Where the plane keeps an agent's configuration and transcripts (outside its worktree)."""
    return config.data_dir.resolve() / "agents" / run.tenant / run.run_id / agent_id


def prepare(
    config: LocalConfig, run: Any, session: Any, worktree: Path, token: str, stdin: str,
    git_dirs: Sequence[Path] = (), sockets: Path | None = None, lent_objects: Sequence[Path] = (),
) -> Launch:
    """Everything a launch needs; raises ``MissingCommand`` when no CLI fits the provider and
    ``sandbox.SandboxUnavailable`` when the sandbox cannot confine it.

    ``git_dirs`` are the worktree's git metadata folders (its own and the repository's),
    which a sandboxed CLI must be able to write for ``git commit`` to work; ``lent_objects`` the
    lane's object store that the agent's repository borrows (read-only); ``sockets`` is the
    folder of the forwarder's Unix sockets (the sandbox's only way out).
    """
    process = session.process or {}
    provider, model = str(process.get("provider", "")), str(process.get("model", ""))
    argv = base_command(config, provider, model)
    if not argv:
        raise MissingCommand("SQUADOPS_LOCAL_AGENT_COMMAND is empty.")
    folder = agent_dir(config, run, session.agent_id)
    subfolders = [folder / sub for sub in ("home", "claude", "codex", "tmp")]
    for sub in subfolders:
        sub.mkdir(parents=True, exist_ok=True)
    points: tuple[sandboxing.Endpoint, ...] = ()
    seen = config  # the configuration as the agent sees it (its URLs from inside the sandbox)
    if config.sandbox.enabled:
        why = sandboxing.unavailable(config.sandbox)
        if why:
            raise sandboxing.SandboxUnavailable(why)
        points = sandboxing.endpoints([("mcp", config.base_url), ("model", config.model_proxy_base_url)])
        inside = {p.name: p.inside_url for p in points}
        seen = replace(config, base_url=inside["mcp"], model_proxy_base_url=inside.get("model", ""))
        points = sandboxing.distinct(points)  # one forwarder per address
    settings_file, codex_file = folder / "claude" / "settings.json", folder / "codex" / "config.toml"
    _write_private(folder / "mcp.json", json.dumps(mcp_config(seen, run, session), indent=2))
    _write_private(settings_file, json.dumps(claude_settings(seen), indent=2))
    _write_private(codex_file, codex_config(seen, model, list(git_dirs)))
    (folder / "author").write_text(agent_identity(config, session.role_key) + "\n")
    argv = with_configuration(argv, config, folder)
    env = agent_env(seen, run, session, token, folder, worktree, model_token(config, run, session, time.time()))
    plan = None
    if config.sandbox.enabled:
        writable = [worktree, *git_dirs, *subfolders]
        hosts = None
        if any(not sandboxing.is_ip(p.host) for p in points):
            hosts = folder / "hosts"
            _write_private(hosts, sandboxing.hosts_file(points))
            hosts.chmod(0o644)
        if shutil.which(argv[0], path=os.environ.get("PATH", "")) is None:
            # (bare, Popen would fail on it; under bwrap, bwrap would start and then fail)
            raise MissingCommand(f"The agent CLI {argv[0]!r} cannot be run (No such file or directory); install it "
                                 "or set SQUADOPS_LOCAL_AGENT_COMMAND.")
        command = [sandboxing.resolve_program(config.sandbox, argv[0], os.environ.get("PATH", "")), *argv[1:]]
        argv = sandboxing.bwrap_argv(
            config.sandbox, command, cwd=worktree, writable=writable,
            read_only_files=[folder / "mcp.json", settings_file, codex_file, *git_controls(git_dirs), *lent_objects],
            points=points,
            sockets=sockets if points else None, hosts=hosts,
        )
        env = sandboxing.sandbox_env(env)
        plan = sandboxing.Plan(
            confinement=sandboxing.Confinement(
                sandboxing.BWRAP, tuple(str(p) for p in writable), tuple(p.address for p in points)),
            endpoints=points, sockets=sockets if points else None, command=tuple(command),
        )
    return Launch(
        argv=argv,
        env=env,
        cwd=worktree,
        stdin=stdin,
        transcript=folder / f"attempt-{session.process_attempt + 1}.jsonl",
        provider=provider,
        model=model,
        sandbox=plan,
    )
