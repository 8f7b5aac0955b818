"""Bringing a repository is events all the way: the mirror, each fetch before a run, the lane's
pull request and the push back are recorded, a rebuild of the read models gives the same
bytes, and replaying them fetches nothing and pushes nothing."""

from __future__ import annotations

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
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path / "data"), tick_seconds=0.001))
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
        kinds = [e.kind for e in NotificationSource(container.event_store.recorder).read(1, 1_000_000)]
        assert {"Project.RepositoryProvisioned", "Project.RepositoryFetched", "AgentSession.PullRequestOpened",
                "GateThread.BranchPushed"} <= set(kinds)
        live = {p.name: container.store.dump(p.name) for p in read_projectors()}

        mirror = tmp_path / "data" / "vcs" / TENANT / "acme" / "api.git"
        mirrored = git(mirror, "rev-parse", "main")
        (origin / "later.txt").write_text("after the run\n")
        git(origin, "add", "later.txt")
        git(origin, "commit", "--quiet", "-m", "Later")
        branches = git(origin, "for-each-ref", "--format=%(refname) %(objectname)")
        report = rebuild(container.store, NotificationSource(container.event_store.recorder), read_projectors(), page_size=5)
        assert report.position == container.event_store.max_position()
        assert {p.name: container.store.dump(p.name) for p in read_projectors()} == live
        assert git(mirror, "rev-parse", "main") == mirrored  # replay fetched nothing
        assert git(origin, "for-each-ref", "--format=%(refname) %(objectname)") == branches  # and pushed nothing
    finally:
        container.close()
