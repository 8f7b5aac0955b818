"""The agent sandbox's command line (issue 25): what bubblewrap shows an agent, what it hides,
which environment it gets and which addresses it can reach; and the setting's rules."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from workers.builders import sandbox_config
from workers.planes.local import sandbox
from workers.planes.local.forward import Forwarder
from workers.planes.local.launch import LocalConfig, prepare
from workers.planes.local.sandbox import CLIS_AT, SOCKETS_AT, SandboxConfig, SandboxUnavailable
from workers.settings import SettingsError, load_settings


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def _singles(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def _launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **changes: object) -> tuple[object, Path, Path]:
    data, checkout, clis = tmp_path / "data", tmp_path / "checkout", tmp_path / "checkout" / ".clis" / "node_modules"
    (clis / ".bin").mkdir(parents=True)
    (clis / ".bin" / "claude").write_text("#!/bin/sh\n")
    (clis / ".bin" / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{clis / '.bin'}:/usr/bin:/bin")
    monkeypatch.setenv("SQUADOPS_EDGE_JWT_KEY", "edge-secret-never-for-agents")
    worktree = data / "worktrees" / "default" / "run-9" / "backend"
    worktree.mkdir(parents=True)
    repo = data / "repos" / "default" / "acme" / "backend.git"
    admin = repo / "worktrees" / "backend"
    admin.mkdir(parents=True)
    (repo / "config").write_text("[core]\n\tbare = true\n")
    (repo / "hooks").mkdir()
    config = LocalConfig(
        data_dir=data, base_url="http://127.0.0.1:8123", token_key="k",
        model_proxy_base_url="https://models.example", model_proxy_token="model-token",
        sandbox=SandboxConfig(hidden=(data, checkout), clis=clis), **changes,  # type: ignore[arg-type]
    )
    run = SimpleNamespace(tenant="default", run_id="run-9", project_slug="acme")
    session = SimpleNamespace(agent_id="backend", session_id="ses-1", role_key="role_backend", process_attempt=0,
                              process={"provider": "claude-code-cli", "model": "sonnet"})
    sockets = tmp_path / "net"
    sockets.mkdir()
    launch = prepare(config, run, session, worktree, "agent-token", "brief", git_dirs=[repo, admin], sockets=sockets)
    return launch, data, worktree


def test_paths_the_root_is_read_only_the_worktree_git_and_config_writable_the_rest_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    launch, data, worktree = _launch(tmp_path, monkeypatch)
    argv = launch.argv  # type: ignore[attr-defined]
    folder = data.resolve() / "agents" / "default" / "run-9" / "backend"
    repo = data / "repos" / "default" / "acme" / "backend.git"
    assert argv[:3] == ["/usr/bin/bwrap", "--unshare-all", "--die-with-parent"]
    assert ("/", "/") in _pairs(argv, "--ro-bind") and _pairs(argv, "--bind").count(("/", "/")) == 0
    assert _singles(argv, "--proc") == ["/proc"] and _singles(argv, "--dev") == ["/dev"]
    # Writable: exactly the worktree, its git metadata and the agent's private folders.
    assert [src for src, _ in _pairs(argv, "--bind")] == [
        str(worktree), str(repo), str(repo / "worktrees" / "backend"),
        *(str(folder / sub) for sub in ("home", "claude", "codex", "tmp"))]
    assert all(src == dst for src, dst in _pairs(argv, "--bind"))
    # Hidden: a private /tmp, and tmpfs over the homes, /run, the data dir and the checkout,
    # each remounted read-only once the allowed paths are bound on top.
    tmpfs = _singles(argv, "--tmpfs")
    assert tmpfs[0] == "/tmp"
    assert {"/root", "/run", "/var/tmp"} <= set(tmpfs)
    assert str(data.resolve()) not in tmpfs  # (pytest's data dir is under /tmp, private already)
    assert set(_singles(argv, "--remount-ro")) == set(tmpfs[1:])
    # The machine's own secrets on the read-only root are empty inside.
    assert ("/dev/null", "/etc/shadow") in _pairs(argv, "--ro-bind") and "/etc/ssh" in tmpfs
    order = {a: i for i, a in reversed(list(enumerate(argv)))}
    assert order["--tmpfs"] < order["--bind"] < order["--remount-ro"]
    # The agent's transcripts stay out: only its settings files are shown, read-only, on top.
    shown = dict(_pairs(argv, "--ro-bind"))
    assert str(folder / "mcp.json") in shown and str(folder / "claude" / "settings.json") in shown
    # What decides which commands git runs in the lane repository (the plane's and the gate's
    # git run there on the host) is read-only on top of its writable folder.
    assert {str(repo / "config"), str(repo / "hooks"), str(repo / "objects" / "info")} <= set(shown)
    assert order["--bind"] < max(i for i, a in enumerate(argv) if a == str(repo / "config"))
    assert not any("attempt-" in p for p in shown)
    # The pinned CLIs at a neutral path, found there by the sandbox's PATH.
    assert shown[str(tmp_path / "checkout" / ".clis" / "node_modules")] == str(CLIS_AT)
    assert launch.sandbox.command[0] == f"{CLIS_AT}/.bin/claude"  # type: ignore[attr-defined]
    assert launch.env["PATH"].startswith(f"{CLIS_AT}/.bin:")  # type: ignore[attr-defined]
    assert _singles(argv, "--chdir") == [str(worktree)]
    assert launch.confinement["writable_paths"][0] == str(worktree)  # type: ignore[attr-defined]


def test_hidden_paths_get_a_tmpfs_unless_already_covered(tmp_path: Path) -> None:
    checkout = Path(__file__).resolve().parents[2]
    data = checkout / "var"
    config = SandboxConfig(hidden=(Path("/tmp/squad-data"), Path("/"), checkout, data))
    argv = sandbox.bwrap_argv(config, ["claude"], cwd=data / "wt", writable=[data / "wt"])
    tmpfs = _singles(argv, "--tmpfs")
    if Path("/tmp") in checkout.parents:  # a clone under /tmp: hidden by /tmp's own tmpfs
        assert argv[argv.index("/tmp") - 1] == "--tmpfs" and str(checkout) not in tmpfs
    else:
        assert str(checkout) in tmpfs and str(checkout) in _singles(argv, "--remount-ro")
    assert str(data) not in tmpfs  # inside the hidden checkout
    assert "/tmp/squad-data" not in tmpfs  # covered by /tmp's tmpfs already
    assert "/" not in tmpfs  # a setting never hides the system
    assert argv[-2:] == ["--", "claude"]  # no allowed address: no forwarder in front


def test_environment_is_an_allow_list_with_the_agents_ids_and_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQUADOPS_MCP_TOKEN_KEY", "token-key-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    launch, _, _ = _launch(tmp_path, monkeypatch)
    env = launch.env  # type: ignore[attr-defined]
    assert {k: v for k, v in env.items() if k.startswith("SQUADOPS_")} == {
        "SQUADOPS_RUN_ID": "run-9", "SQUADOPS_SESSION_ID": "ses-1", "SQUADOPS_AGENT_ID": "backend"}
    assert env["SQUAD_MCP_TOKEN"] == "agent-token" and env["SQUAD_MODEL_TOKEN"] == "model-token"
    assert env["ANTHROPIC_AUTH_TOKEN"] == "model-token"
    values = set(env.values())
    assert not {"edge-secret-never-for-agents", "token-key-secret", "aws-secret"} & values
    assert "AWS_SECRET_ACCESS_KEY" not in env and "PYTHONPATH" not in env


def test_network_a_private_namespace_and_a_forwarder_per_allowed_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    launch, data, _ = _launch(tmp_path, monkeypatch)
    argv, plan = launch.argv, launch.sandbox  # type: ignore[attr-defined]
    assert "--unshare-all" in argv and "--share-net" not in argv
    assert [(p.name, p.address, p.inside_port) for p in plan.endpoints] == [
        ("mcp", "127.0.0.1:8123", 8123), ("model", "models.example:443", 20000)]
    assert plan.confinement.reachable == ("127.0.0.1:8123", "models.example:443")
    # The forwarder's sockets, read-only; the model's name resolves to loopback inside.
    shown = dict(_pairs(argv, "--ro-bind"))
    assert shown[str(tmp_path / "net")] == str(SOCKETS_AT)
    folder = data.resolve() / "agents" / "default" / "run-9" / "backend"
    assert shown[str(folder / "hosts")] == "/etc/hosts"
    assert "127.0.0.1 models.example" in (folder / "hosts").read_text().splitlines()
    # Inside, socat listens on each loopback port before the CLI runs in its place.
    script = argv[argv.index("-c") + 1]
    assert "TCP-LISTEN:8123,bind=127.0.0.1" in script and f"UNIX-CONNECT:{SOCKETS_AT}/0.sock" in script
    assert "TCP-LISTEN:20000,bind=127.0.0.1" in script and f"UNIX-CONNECT:{SOCKETS_AT}/1.sock" in script
    assert script.index("0100007F:4E20") < script.index('exec "$@"')
    assert argv[argv.index("-c") + 2:][:2] == ["squadops-sandbox", f"{CLIS_AT}/.bin/claude"]
    # The agent is given the URLs as it reaches them from inside.
    mcp = json.loads((folder / "mcp.json").read_text())["mcpServers"]["squadops"]
    assert mcp["url"] == "http://127.0.0.1:8123/mcp"
    assert launch.env["ANTHROPIC_BASE_URL"] == "https://models.example:20000"  # type: ignore[attr-defined]


def test_endpoints_keep_ports_rewrite_ip_literals_and_share_one_address() -> None:
    points = sandbox.endpoints([("mcp", "http://10.1.2.3:8000"), ("model", "http://10.1.2.3:8000/models"),
                                ("other", "http://squad.internal")])
    assert [(p.address, p.inside_url) for p in points] == [
        ("10.1.2.3:8000", "http://127.0.0.1:8000"), ("10.1.2.3:8000", "http://127.0.0.1:8000/models"),
        ("squad.internal:80", "http://squad.internal:20000")]
    assert [p.address for p in sandbox.distinct(points)] == ["10.1.2.3:8000", "squad.internal:80"]


def test_a_cli_in_a_hidden_folder_is_refused_not_run_bare(tmp_path: Path) -> None:
    home_cli = Path("/root/.local/bin/agent")
    with pytest.raises(SandboxUnavailable, match="SQUADOPS_AGENT_SANDBOX_READ_ONLY"):
        sandbox.resolve_program(SandboxConfig(), str(home_cli), "")
    assert sandbox.resolve_program(SandboxConfig(read_only=(Path("/root/.local"),)), str(home_cli), "") == str(home_cli)


def test_a_missing_bubblewrap_is_said_not_skipped(tmp_path: Path) -> None:
    why = sandbox.unavailable(SandboxConfig(bwrap=str(tmp_path / "no-bwrap")))
    assert "bubblewrap is not installed" in why
    assert sandbox.unavailable(SandboxConfig(socat=str(tmp_path / "no-socat"))).startswith("socat is not installed")
    assert sandbox.unavailable(SandboxConfig()) == ""  # this machine has both, and namespaces


def test_setting_bwrap_by_default_none_refused_in_production_unless_unsafe() -> None:
    assert load_settings({}).agent_sandbox == "bwrap"
    assert load_settings({"SQUADOPS_AGENT_SANDBOX": "none"}).agent_sandbox == "none"
    with pytest.raises(SettingsError, match="SQUADOPS_AGENT_SANDBOX must be"):
        load_settings({"SQUADOPS_AGENT_SANDBOX": "docker"})
    production = {"SQUADOPS_ENV": "production", "SQUADOPS_AGENT_SANDBOX": "none"}
    with pytest.raises(SettingsError, match="SQUADOPS_AGENT_SANDBOX_UNSAFE=1"):
        load_settings(production)
    assert load_settings({**production, "SQUADOPS_AGENT_SANDBOX_UNSAFE": "1"}).agent_sandbox == "none"
    with pytest.raises(SettingsError, match="absolute"):
        load_settings({"SQUADOPS_AGENT_SANDBOX_READ_ONLY": "relative/path"})


def test_the_service_hides_its_data_dir_event_store_and_checkout(tmp_path: Path) -> None:
    settings = load_settings({"SQUADOPS_DATA_DIR": str(tmp_path / "data"),
                              "SQUADOPS_DATABASE_URL": f"sqlite:///{tmp_path / 'db' / 'events.db'}",
                              "SQUADOPS_AGENT_SANDBOX_READ_ONLY": "/opt/toolchain:/srv/tools"})
    config = sandbox_config(settings)
    checkout = Path(sandbox.__file__).resolve().parents[3]
    assert set(config.hidden) == {tmp_path / "data", (tmp_path / "db").resolve(), checkout}
    assert config.read_only == (Path("/opt/toolchain"), Path("/srv/tools"))
    assert config.clis == checkout / ".clis" / "node_modules"


def test_the_forwarder_carries_a_connection_both_ways_and_ends_it_with_the_process() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data.upper())

    threading.Thread(target=echo, daemon=True).start()
    forwarder = Forwarder()
    folder = Forwarder.folder()
    point = sandbox.endpoints([("mcp", f"http://127.0.0.1:{port}")])[0]
    forwarder.open(folder, [point])
    assert (folder / "0.sock").stat().st_mode & 0o777 == 0o600
    client = socket.socket(socket.AF_UNIX)
    client.settimeout(5)
    client.connect(str(folder / "0.sock"))
    client.sendall(b"hello")
    assert client.recv(4096) == b"HELLO"
    # The process exited: its sockets go, and a connection it left open is closed.
    forwarder.close(folder)
    assert not folder.exists()
    assert client.recv(4096) == b""
    client.close()
    server.close()
