"""The journey pages' bench data: a project brought from an existing repository whose delivery
lane opened a pull request of about 2,000 diff lines and then kept working (its transcript
past 1,000 entries), stored by the simulator plane in-process, to be served afterwards.

The lane's own commit is small; the pull request's diff is made large the way a team's would
be: the mirror's default branch is put back to before a large commit of the team's, which
the lane's branch then carries (``git merge-base`` moves back, the diff spans both)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import settings_for
from workers.bootstrap import build
from workers.planes.simulator import FaultRates, SimulatorPlane
from workers.settings import Settings

CHANGED_EVERY = 10  # a changed line every 10 lines of big.py: one hunk, the 9 unchanged between two changes folding 3
BIG_LINES = 1_500
NEW_LINES = 800
TRANSCRIPT = 1_000


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Team", "-c", "user.email=team@example.com", *args], cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def origin_with_history(root: Path) -> tuple[Path, str]:
    """The team's repository: a first commit, then one large change; answers (path, first sha)."""
    root.mkdir(parents=True)
    git(root, "init", "--quiet", "--initial-branch=main")
    (root / "big.py").write_text("".join(f"value_{n} = {n}  # the <first> version\n" for n in range(BIG_LINES)))
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "First version")
    first = git(root, "rev-parse", "HEAD")
    lines = [f"value_{n} = {n * 2 if n % CHANGED_EVERY == 0 else n}  # the <first> version\n" for n in range(BIG_LINES)]
    (root / "big.py").write_text("".join(lines))
    (root / "more.py").write_text("".join(f"def f_{n}(x):\n    return x + {n}\n" for n in range(NEW_LINES // 2)))
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "A large change")
    return root, first


def journey_data(root: Path) -> tuple[Settings, str, str]:
    """The stored journey: answers (settings, run id, the authoring agent's id)."""
    origin, first = origin_with_history(root / "team")
    settings = settings_for(f"sqlite:///{root / 'squadops.db'}", data_dir=str(root / "data"), auto_recovery=False)
    c = build(settings)
    try:
        c.start(("projector",))
        binding = {"repository_key": "backend", "vcs_repo_slug": "shop/api", "source_repository_url": str(origin)}
        c.projects.create_project(
            tenant="default", request={"project_key": "shop", "repository_bindings": [binding]}, created_by="operator@example.com"
        )
        assert c.provisioning is not None
        c.provisioning.provision("default", "shop")
        run, _ = c.studio.runs.launch_run(tenant="default", template_id="delivery-core", project_slug="shop", launched_by="op")
        c.studio.runs.request_execution(tenant="default", run_id=run.run_id, requested_by="op")
        plane = SimulatorPlane(
            data_dir=Path(settings.data_dir), vcs_root=settings.vcs_path, review_calls=100_000, faults=FaultRates.none()
        )
        c.studio.ticks.tick_runs(plane, start=[("default", run.run_id)])
        author = ""
        for _ in range(TRANSCRIPT * 3):
            c.studio.ticks.tick_runs(plane, tick=[("default", run.run_id)])
            current = c.studio.runs.get_run("default", run.run_id)
            sessions = [c.studio.runs.agent_session(current, a) for a in current.sessions]
            opened = [s for s in sessions if s.pull_requests]
            if opened:
                author = opened[0].agent_id
                if opened[0].tool_call_count >= TRANSCRIPT:
                    break
        assert author, "no lane opened a pull request"
        # The lane works in its own clone of the mirror: its base moved back, the team's large
        # change is now the PR's too.
        lane = Path(settings.data_dir) / "repos" / "default" / "shop" / "backend.git"
        git(lane, "update-ref", "refs/heads/main", first)
        assert c.await_reads(c.event_store.max_position(), c.settings.min_position_wait_seconds)
    finally:
        c.close()
    return settings, run.run_id, author
