"""Bringing a repository is events all the way: the mirror, each fetch before a run, the lane's
pull request and the push back are recorded, a rebuild of the read models gives the same
bytes, and replaying them fetches nothing and pushes nothing."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from domain.gate.commands import GateRequest
from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource
from projections.projects.pulls import pulls_partition
from tests.conftest import settings_for
from tests.integration.test_bring_repository_http import git, make_origin
from workers.bootstrap import build
from workers.read_models import read_projectors

TENANT = "default"


def test_the_journey_rebuilds_to_the_same_bytes_and_replay_touches_no_repository(tmp_path: Path) -> None:
    origin = make_origin(tmp_path / "team", {"README.md": "# Team\n"})
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path / "data"), tick_seconds=0.001,
                                     simulator_faults=False))
    try:
        request = {"project_key": "acme", "repository_bindings": [
            {"repository_key": "backend", "vcs_repo_slug": "acme/api", "source_repository_url": str(origin)}]}
        container.projects.create_project(tenant=TENANT, request=request, created_by="op@example.com")
        container.provisioning.provision(TENANT, "acme")
        run, _ = container.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
        container.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by="op")
        deadline = time.monotonic() + 60
        while not container.store.scan("pulls", partition=pulls_partition(TENANT, "acme")):
            assert time.monotonic() < deadline, "no pull request within 60 s"
            container.runner.run_once()
            container.ticker.run_once()
        record = container.gate.run_thread(GateRequest(tenant=TENANT, thread_key=run.run_id, actor="op", agent_key="backend"))
        push = record["publication"]["push"]
        assert push["status"] == "pushed" and git(origin, "rev-parse", push["branch"]) == push["head_sha"]
        while container.runner.run_once():
            pass
        kinds = [e.kind for e in NotificationSource(container.event_store).read(1, 1_000_000)]
        assert {"Project.RepositoryProvisioned", "Project.RepositoryFetched", "AgentSession.PullRequestOpened",
                "GateThread.BranchPushed"} <= set(kinds)
        live = {p.name: container.store.dump(p.name) for p in read_projectors()}

        mirror = tmp_path / "data" / "vcs" / TENANT / "acme" / "api.git"
        mirrored = git(mirror, "rev-parse", "main")
        (origin / "later.txt").write_text("after the run\n")
        git(origin, "add", "later.txt")
        git(origin, "commit", "--quiet", "-m", "Later")
        branches = git(origin, "for-each-ref", "--format=%(refname) %(objectname)")
        report = rebuild(container.store, NotificationSource(container.event_store), read_projectors(), page_size=5)
        assert report.position == container.event_store.max_position()
        assert {p.name: container.store.dump(p.name) for p in read_projectors()} == live
        assert git(mirror, "rev-parse", "main") == mirrored  # replay fetched nothing
        assert git(origin, "for-each-ref", "--format=%(refname) %(objectname)") == branches  # and pushed nothing

        # The next run fetches the origin again, and its lanes start from what the team has now.
        later, _ = container.studio.runs.launch_run(tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by="op")
        assert git(mirror, "rev-parse", "main") == git(origin, "rev-parse", "HEAD")
        worktrees = container.plane.worktrees
        lane = worktrees.repository_for(later, "backend")
        worktrees.ensure_repository(lane)
        assert git(lane.path, "rev-parse", "main") == git(origin, "rev-parse", "HEAD")
    finally:
        container.close()


def test_what_an_agent_writes_into_its_lane_repository_runs_nothing_on_the_host(tmp_path: Path) -> None:
    """A sandboxed agent may write its lane repository's configuration and hooks: bringing the
    mirror's branch in and reading the pull request's diff must run none of them."""
    from types import SimpleNamespace

    from workers.adapters.git_review import GitReviews
    from workers.planes.local.worktrees import Worktrees

    origin = make_origin(tmp_path / "team", {"README.md": "# Team\n"})
    vcs = tmp_path / "data" / "vcs"
    mirror = vcs / TENANT / "acme" / "api.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(origin), str(mirror)], check=True)
    worktrees = Worktrees(tmp_path / "data", vcs)
    run = SimpleNamespace(tenant=TENANT, project_slug="acme", run_id="run-1", project_facts={"repository_bindings": [
        {"repository_key": "backend", "vcs_repo_slug": "acme/api", "default_branch": "main", "source": "mirror"}]})
    changes = worktrees.commit_files(run, "backend", {".gitattributes": "* diff=evil\n", "a.txt": "a\n"}, "work", "dev@x")
    lane = worktrees.repository_for(run, "backend").path
    marker = tmp_path / "ran"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("pre-receive", "post-receive", "update", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / hook).chmod(0o755)
    for key, value in (("core.hooksPath", str(hooks)), ("diff.evil.textconv", f"touch {marker}; cat"),
                       ("diff.external", f"touch {marker}"), ("log.showSignature", "true"),
                       ("gpg.program", f"touch {marker}"), ("remote.origin.uploadpack", f"touch {marker}; git-upload-pack")):
        git(lane, "config", key, value)
    (origin / "b.txt").write_text("b\n")
    git(origin, "add", "b.txt")
    git(origin, "commit", "--quiet", "-m", "b")
    subprocess.run(["git", "--git-dir", str(mirror), "fetch", "--quiet", str(origin), "+refs/heads/main:refs/heads/main"], check=True)
    worktrees.ensure_repository(worktrees.repository_for(run, "backend"))
    assert git(lane, "rev-parse", "main") == git(origin, "rev-parse", "HEAD")
    review = GitReviews(worktrees).pull_changes(run, "backend", changes.head_sha)
    assert {f["path"] for f in review["files"]} == {".gitattributes", "a.txt"}
    assert not marker.exists()


def test_a_hook_an_agent_writes_into_its_lane_repository_does_not_run_when_the_plane_keeps_its_work(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from workers.planes.local.worktrees import Worktrees

    worktrees = Worktrees(tmp_path / "data")
    run = SimpleNamespace(tenant=TENANT, project_slug="acme", run_id="run-1",
                          project_facts={"repository_bindings": [{"repository_key": "backend", "default_branch": "main"}]})
    worktree = worktrees.ensure(run, "backend")
    lane = worktrees.repository_for(run, "backend").path
    marker = tmp_path / "ran"
    for hook in ("post-commit", "pre-commit", "post-checkout", "reference-transaction"):
        (lane / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (lane / "hooks" / hook).chmod(0o755)
    git(lane, "config", "core.fsmonitor", f"touch {marker}; true")
    (worktree / "work.txt").write_text("left uncommitted\n")
    assert worktrees.preserve(worktree, "dev@example.com", "kept")
    worktrees.recreate(run, "backend")
    assert not marker.exists()
