"""One local-git adapter behind both vcs ports: what the project factory provisions is the
repository the gate publishes into (same bare repository, same starter commit)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from domain.gate.ports import VcsError
from tests.conftest import settings_for
from workers.adapters.local_git import LocalGitVcs
from workers.bootstrap import build


def test_provisioned_repository_is_the_one_the_gate_publishes_into(tmp_path: Path) -> None:
    vcs = LocalGitVcs(tmp_path / "vcs", "https://vcs.example")
    repo = vcs.create_repository(
        tenant="default", project_slug="acme", repo_slug="acme/api", default_branch="trunk", private=True,
        files={"README.md": "# acme\n", ".env": "SENTRY_DSN=https://k@errors.example/1\n"},
    )
    assert repo.url == "https://vcs.example/acme/api"  # the hosting URL, never the server's path
    bare = tmp_path / "vcs" / "default" / "acme" / "api.git"  # the tenant's own storage
    head = subprocess.run(["git", "--git-dir", str(bare), "rev-parse", "refs/heads/trunk"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert head == repo.node_id

    gate = vcs.for_tenant("default")
    commit = gate.commit_branch("acme/api", base_branch="trunk", branch_name="gate/1",
                                files={"src/app.py": b"print('hi')\n"}, message="gate", author="Gate <gate@example.com>")
    assert commit.base_sha == repo.node_id  # built on the provisioned starter commit
    assert gate.read_file("acme/api", commit.head_sha, ".env") == b"SENTRY_DSN=https://k@errors.example/1\n"
    assert gate.read_file("acme/api", commit.head_sha, "src/app.py") == b"print('hi')\n"
    # Another tenant's "acme/api" is another repository: it cannot be reached by name.
    assert vcs.for_tenant("globex").read_file("acme/api", commit.head_sha, ".env") is None

    with pytest.raises(VcsError, match="already exists"):
        vcs.create_repository(tenant="default", project_slug="acme", repo_slug="acme/api", default_branch="trunk",
                              private=True, files={})
    with pytest.raises(VcsError):
        vcs.create_repository(tenant="default", project_slug="acme", repo_slug="../escape", default_branch="main",
                              private=True, files={})
    with pytest.raises(VcsError):
        vcs.create_repository(tenant="default", project_slug="acme", repo_slug="acme/web", default_branch="main",
                              private=True, files={"../x": "no"})


def test_the_composition_root_wires_one_vcs_adapter_for_both_ports(tmp_path: Path) -> None:
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path)))
    try:
        assert container.provisioning.vcs is container.gate.vcs
        assert isinstance(container.gate.vcs, LocalGitVcs)
    finally:
        container.close()
