"""What the local-plane tests share: the service on a real port (agent processes reach its
``/mcp``), the stand-in CLI's command line, and small HTTP helpers."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from api.app import create_app
from tests import infra
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE, eventually
from workers.bootstrap import Container, build
from workers.planes.local import LocalPlane
from workers.settings import Settings

STANDIN = Path(__file__).with_name("standin_agent.py")
SANDBOX_PYTHON = "/usr/bin/python3"
STUDIO = "/v1/admin/studio"
PLANE = "/control-plane/studio"
PROJECT = {key: value for key, value in DEMO_LIKE.items() if key != "project_assembly"}


def local_settings(database_url: str, data_dir: Path, plan: dict[str, Any], port: int, **changes: Any) -> Settings:
    """The local plane running the stand-in CLI with ``plan`` for every provider."""
    plan_file = data_dir / "plan.json"
    data_dir.mkdir(parents=True, exist_ok=True)
    plan_file.write_text(json.dumps(plan))
    values: dict[str, Any] = {
        "execution_plane": "local",
        "data_dir": str(data_dir),
        "port": port,  # agents reach /mcp at the address the service listens on
        # The sandbox shows the machine's Python, the stand-in and its plan (read-only); the
        # test's own interpreter (a virtualenv in the checkout, under a home) stays hidden.
        "local_agent_command": f"{SANDBOX_PYTHON} {STANDIN} --plan {plan_file}",
        "agent_sandbox_read_only": f"{STANDIN.parent}:{plan_file}",
        "local_first_tool_seconds": 30.0,
        "local_stop_grace_seconds": 2.0,
    }
    return settings_for(database_url, **{**values, **changes})


@dataclass
class Served:
    container: Container
    http: httpx.Client
    data_dir: Path

    @property
    def plane(self) -> LocalPlane:
        plane = self.container.plane
        assert isinstance(plane, LocalPlane)
        return plane

    def launch(self) -> str:
        answer = self.http.post(f"{STUDIO}/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["run_id"]
        assert self.http.post(f"{STUDIO}/runs/{run_id}/execute").status_code == 202
        return run_id

    def sessions(self, run_id: str) -> dict[str, dict[str, Any]]:
        state = self.http.get(f"{STUDIO}/runs/{run_id}/session-state")
        assert state.status_code == 200, state.text
        return {s["agent_id"]: s for s in state.json()["sessions"]}

    def run_status(self, run_id: str) -> str:
        return self.http.get(f"{STUDIO}/runs/{run_id}/session-state").json()["status"]

    def feed(self, run_id: str) -> dict[str, Any]:
        answer = self.http.get(f"{PLANE}/observability-feed", params={"project_slug": "acme", "run_id": run_id, "limit": 200})
        assert answer.status_code == 200, answer.text
        return answer.json()

    def verb(self, run_id: str, session_id: str, body: dict[str, Any]) -> None:
        answer = self.http.post(f"{PLANE}/runs/{run_id}/sessions/{session_id}/control", json=body)
        assert answer.status_code == 202, answer.text

    def wait_status(self, run_id: str, agent_id: str, *statuses: str, timeout: float = 20.0) -> dict[str, Any]:
        return eventually(
            lambda: (s := self.sessions(run_id).get(agent_id)) and s["live_status"] in statuses and s, timeout=timeout
        )

    def worktree(self, run_id: str, agent_id: str) -> Path:
        return self.data_dir / "worktrees" / "default" / run_id / agent_id

    def repository(self, key: str) -> Path:
        """A lane's repository (where the plane brings each agent's branch)."""
        return self.data_dir / "repos" / "default" / "acme" / f"{key}.git"

    def own_repository(self, run_id: str, agent_id: str) -> Path:
        """The agent's own repository (its worktree's)."""
        return self.data_dir / "agent-repos" / "default" / run_id / f"{agent_id}.git"

    def session_key(self, run_id: str, agent_id: str) -> str:
        return f"ses:default:{run_id}:{self.sessions(run_id)[agent_id]['session_id']}:{agent_id}"

    def pid(self, run_id: str, agent_id: str, other_than: int = 0) -> int:
        """The pid of the agent's live process (a new one when ``other_than`` is given)."""
        key = self.session_key(run_id, agent_id)

        def probe() -> int:
            process = self.plane.process_of(key)
            return process.pid if process and not process.finished and process.pid != other_than else 0

        return eventually(probe)


@contextlib.contextmanager
def served(database_url: str, data_dir: Path, plan: dict[str, Any], **changes: Any) -> Iterator[Served]:
    """The service with the local plane on a real uvicorn server, the project created."""
    port = infra.free_port()
    container = build(local_settings(database_url, data_dir, plan, port, **changes))
    server = uvicorn.Server(uvicorn.Config(
        create_app(container), host="127.0.0.1", port=port, log_level="warning", access_log=False,
        timeout_graceful_shutdown=1,
    ))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started or not thread.is_alive(), timeout=15)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=ADMIN, timeout=30) as http:
            assert http.post("/v1/project-factory/projects", json=PROJECT).status_code == 201
            yield Served(container, http, data_dir)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        container.close()


def worktree_list(repository: Path) -> list[str]:
    """``git worktree list`` of a repository, one path per line."""
    out = subprocess.run(["git", "-C", str(repository), "worktree", "list", "--porcelain"],
                         capture_output=True, text=True, check=True).stdout
    return [line.removeprefix("worktree ") for line in out.splitlines() if line.startswith("worktree ")]


def gone(pid: int) -> bool:
    """The process has exited and been reaped (no zombie left)."""
    return not Path(f"/proc/{pid}").exists()


def process_group(pgid: int) -> list[int]:
    """Every live process of the group (a sandboxed agent: bwrap, its init, the CLI, its tools)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members
