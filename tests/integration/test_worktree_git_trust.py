"""The plane's git on the host never takes an agent's word for where a worktree's repository
is: the sandboxed agent writes its worktree's ``.git`` file and its folder's ``commondir`` in
its repository, and either could hand the plane's ``git add`` (run as the service's user,
outside the sandbox, to keep the agent's uncommitted work) a configuration of the agent's: a
clean filter or a signing program that runs a command. The worktree's repository and folder
are the ones the plane made for the agent, found by the worktree they record; the work is
kept on the agent's branch all the same (and brought into the lane), and the next sandbox is
given no folder the agent named."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from workers.planes.local.worktrees import Worktrees

RUN = SimpleNamespace(tenant="default", run_id="run-1", project_slug="acme", project_facts={})


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def hostile_config(gitdir: Path, marker: Path) -> None:
    """A configuration whose filter and signing program run a command (the marker's touch)."""
    git("--git-dir", str(gitdir), "config", "filter.x.clean", f"touch {marker}; cat", cwd=gitdir)
    git("--git-dir", str(gitdir), "config", "commit.gpgSign", "true", cwd=gitdir)
    git("--git-dir", str(gitdir), "config", "gpg.program", f"touch {marker}; false", cwd=gitdir)


def plant_gitdir(tree: Path, marker: Path) -> None:
    """The agent's own repository in its worktree, and the worktree's ``.git`` pointed at it."""
    git("init", "--quiet", str(tree / ".evil-src"), cwd=tree)
    (tree / ".evil-src" / ".git").rename(tree / ".evil")
    (tree / ".evil-src").rmdir()
    hostile_config(tree / ".evil", marker)
    (tree / ".git").write_text(f"gitdir: {tree / '.evil'}\n")


def plant_commondir(tree: Path, marker: Path) -> None:
    """A common directory of the agent's (a copy of the lane repository's, plus its config),
    named in the worktree's folder's ``commondir``."""
    admin = Path((tree / ".git").read_text().removeprefix("gitdir:").strip())
    evil = tree / ".common"
    repo = admin.parent.parent
    subprocess.run(["cp", "-r", str(repo), str(evil)], check=True)
    hostile_config(evil, marker)
    (admin / "commondir").write_text(f"{evil}\n")


@pytest.mark.parametrize("plant", [plant_gitdir, plant_commondir])
def test_the_plane_keeps_an_agents_work_without_running_its_git_configuration(tmp_path: Path, plant) -> None:  # type: ignore[no-untyped-def]
    worktrees = Worktrees(tmp_path / "data")
    tree = worktrees.ensure(RUN, "planner")
    repo = worktrees.repository_for(RUN, "planner").path
    own = worktrees.own_repository("default", "run-1", "planner")
    marker = tmp_path / "ran-on-the-host"
    (tree / ".gitattributes").write_text("* filter=x\n")
    (tree / "NOTES.md").write_text("notes\n")
    plant(tree, marker)

    assert worktrees.git_dirs(tree) == [own, own / "worktrees" / "planner"]
    commit = worktrees.preserve(tree, "planner@agents.squadops.local", "squadops: work kept")
    assert not marker.exists()
    assert commit and git("--git-dir", str(repo), "rev-parse", "refs/heads/squad/run-1/planner", cwd=tmp_path) == commit
    assert git("--git-dir", str(repo), "show", f"{commit}:NOTES.md", cwd=tmp_path) == "notes"
    assert worktrees.changes(RUN, "planner") is not None
    assert worktrees.remove(tree) and not tree.exists() and not marker.exists() and not own.exists()
    assert git("--git-dir", str(repo), "worktree", "list", "--porcelain", cwd=tmp_path).count("worktree ") == 1
    assert git("--git-dir", str(repo), "show", "refs/heads/squad/run-1/planner:NOTES.md", cwd=tmp_path) == "notes"


def test_a_git_file_naming_a_folder_elsewhere_gives_the_next_sandbox_nothing(tmp_path: Path) -> None:
    """A ``.git`` that names ``<somewhere>/worktrees/x`` would have made ``<somewhere>`` a
    writable folder of the agent's next sandbox (the service's data, its checkout ...)."""
    worktrees = Worktrees(tmp_path / "data")
    tree = worktrees.ensure(RUN, "planner")
    own = worktrees.own_repository("default", "run-1", "planner")
    elsewhere = tmp_path / "data" / "events" / "worktrees" / "x"
    elsewhere.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {elsewhere}\n")
    assert worktrees.git_dirs(tree) == [own, own / "worktrees" / "planner"]
    # A worktree no lane repository records is no worktree of the plane's at all.
    stray = tmp_path / "data" / "worktrees" / "default" / "run-1" / "stray"
    stray.mkdir()
    (stray / ".git").write_text(f"gitdir: {elsewhere}\n")
    assert worktrees.git_dirs(stray) == [] and not worktrees.is_worktree(stray)


def test_a_fifo_among_the_records_never_holds_the_plane(tmp_path: Path) -> None:
    """The agent can put a FIFO where the plane reads a record (another folder's ``gitdir``, its
    own ``commondir``): reading one would wait for a writer forever, under the plane's lock."""
    worktrees = Worktrees(tmp_path / "data")
    tree = worktrees.ensure(RUN, "planner")
    repo = worktrees.repository_for(RUN, "planner").path
    own = worktrees.own_repository("default", "run-1", "planner")
    (own / "worktrees" / "zz").mkdir()
    os.mkfifo(own / "worktrees" / "zz" / "gitdir")
    admin = own / "worktrees" / "planner"
    (admin / "commondir").unlink()
    os.mkfifo(admin / "commondir")
    (tree / "NOTES.md").write_text("notes\n")
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.append(worktrees.preserve(tree, "p@x", "kept")), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert done and done[0], "the plane waited on a FIFO"
    assert git("--git-dir", str(repo), "show", f"{done[0]}:NOTES.md", cwd=tmp_path) == "notes"


def test_a_repository_inside_a_worktree_keeps_the_worktree(tmp_path: Path) -> None:
    """The plane's git runs no submodule, so it cannot see what is uncommitted inside a
    repository the agent made in its worktree (committed as a gitlink or not): the worktree
    stays rather than go with that work."""
    worktrees = Worktrees(tmp_path / "data")
    tree = worktrees.ensure(RUN, "planner")
    inner = tree / "vendor" / "lib"
    git("init", "--quiet", str(inner), cwd=tree)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "--allow-empty", "-m", "lib", cwd=inner)
    git("add", "vendor/lib", cwd=tree)  # the agent commits it, as a gitlink
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "-m", "Vendor the lib", cwd=tree)
    assert worktrees.is_clean(tree)
    (inner / "draft.md").write_text("only here\n")
    assert not worktrees.remove(tree)
    assert (inner / "draft.md").read_text() == "only here\n"


def test_the_services_own_environment_naming_a_repository_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Started from inside a git hook (``GIT_DIR``, ``GIT_WORK_TREE`` and the like set, as git
    sets them for its hooks), the plane's git still works in its own repositories."""
    other = tmp_path / "other.git"
    git("init", "--quiet", "--bare", str(other), cwd=tmp_path)
    for name, value in (("GIT_DIR", other), ("GIT_WORK_TREE", tmp_path), ("GIT_INDEX_FILE", tmp_path / "index"),
                        ("GIT_OBJECT_DIRECTORY", other / "objects")):
        monkeypatch.setenv(name, str(value))
    worktrees = Worktrees(tmp_path / "data")
    tree = worktrees.ensure(RUN, "planner")
    (tree / "NOTES.md").write_text("notes\n")
    commit = worktrees.preserve(tree, "planner@agents.squadops.local", "squadops: work kept")
    changes = worktrees.changes(RUN, "planner")
    assert changes is not None and changes.head_sha == commit and changes.paths == ("NOTES.md",)
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(name)
    assert git("--git-dir", str(other), "for-each-ref", cwd=tmp_path) == ""
