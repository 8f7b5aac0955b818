"""Each agent works in a repository of its own that borrows its lane's objects: what it does
there cannot reach the lane repository, nor another agent's branch, of its run or of
another run of the project; the plane brings its work into the lane (``agent_repos``).

Real git throughout, and the real bubblewrap command line the plane builds (``prepare``) for
the sandboxed part: the agent commits, then tries to move another agent's branch in the lane
repository, delete the lane's objects and write another agent's repository.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

from workers.planes.local import sandbox
from workers.planes.local.launch import LocalConfig, prepare
from workers.planes.local.worktrees import Worktrees

RUN = SimpleNamespace(tenant="default", run_id="run-1", project_slug="acme", project_facts={})
LATER = SimpleNamespace(tenant="default", run_id="run-2", project_slug="acme", project_facts={})
AGENT = ("-c", "user.name=agent", "-c", "user.email=agent@agents.squadops.local")


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit(tree: Path, name: str, text: str, message: str) -> str:
    """A commit the agent makes itself, in its worktree."""
    (tree / name).write_text(text)
    git("add", name, cwd=tree)
    git(*AGENT, "commit", "--quiet", "-m", message, cwd=tree)
    return git("rev-parse", "HEAD", cwd=tree)


def ref(repo: Path, name: str) -> str:
    done = subprocess.run(["git", "--git-dir", str(repo), "rev-parse", "--verify", "--quiet", name],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip()


def test_an_agents_commits_reach_the_lane_only_through_the_plane(tmp_path: Path) -> None:
    worktrees = Worktrees(tmp_path / "data")
    planner, curator = worktrees.ensure(RUN, "planner"), worktrees.ensure(RUN, "curator")
    lane = worktrees.repository_for(RUN, "planner").path
    own = worktrees.own_repository("default", "run-1", "planner")
    # Each worktree is of the agent's own repository; the lane's objects are only lent.
    assert worktrees.git_dirs(planner) == [own, own / "worktrees" / "planner"]
    assert worktrees.lent_objects(planner) == [lane / "objects"]
    assert (own / "objects" / "info" / "alternates").read_text() == f"{(lane / 'objects').resolve()}\n"
    assert lane not in worktrees.git_dirs(curator)

    head = commit(planner, "PLAN.md", "# Orders\n", "Plan the orders slice")
    assert ref(lane, "refs/heads/squad/run-1/planner") != head  # not in the lane yet
    changes = worktrees.changes(RUN, "planner")
    assert changes is not None and changes.head_sha == head and changes.paths == ("PLAN.md",)
    assert ref(lane, "refs/heads/squad/run-1/planner") == head
    assert git("--git-dir", str(lane), "show", f"{head}:PLAN.md", cwd=tmp_path) == "# Orders"
    git("--git-dir", str(lane), "fsck", "--connectivity-only", "--no-dangling", cwd=tmp_path)
    # (the curator's branch is untouched: the lane has it at the start commit)
    assert worktrees.changes(RUN, "curator").paths == ()  # type: ignore[union-attr]


def test_a_rewritten_branch_and_the_agents_other_refs_are_kept_in_the_lane(tmp_path: Path) -> None:
    worktrees = Worktrees(tmp_path / "data")
    tree = worktrees.ensure(RUN, "planner")
    lane = worktrees.repository_for(RUN, "planner").path
    first = commit(tree, "PLAN.md", "one\n", "First plan")
    worktrees.changes(RUN, "planner")
    # The agent rewrites its branch, tags a commit, works on another branch and stashes.
    git("reset", "--quiet", "--hard", "HEAD~1", cwd=tree)
    second = commit(tree, "PLAN.md", "two\n", "Second plan")
    git("tag", "-a", "-m", "the plan", "v-plan", cwd=tree)
    git("checkout", "--quiet", "-b", "scratch", cwd=tree)
    scratch = commit(tree, "SCRATCH.md", "scratch\n", "Scratch")
    git("checkout", "--quiet", "squad/run-1/planner", cwd=tree)
    (tree / "PLAN.md").write_text("three, not committed\n")
    git(*AGENT, "stash", "--quiet", cwd=tree)

    assert worktrees.remove(tree)  # clean: everything is in a ref of the agent's repository
    assert not tree.exists() and not worktrees.own_repository("default", "run-1", "planner").exists()
    assert ref(lane, "refs/heads/squad/run-1/planner") == second
    assert ref(lane, f"refs/squadops/kept/run-1/planner/{first}") == first
    agents = "refs/squadops/agents/run-1/planner"
    assert ref(lane, f"{agents}/heads/scratch") == scratch
    assert ref(lane, f"{agents}/tags/v-plan^{{commit}}") == second
    assert git("--git-dir", str(lane), "show", f"{agents}/stash:PLAN.md", cwd=tmp_path) == "three, not committed"
    git("--git-dir", str(lane), "fsck", "--connectivity-only", "--no-dangling", cwd=tmp_path)

    # A fresh worktree of the agent starts from the branch the lane has.
    again = worktrees.ensure(RUN, "planner")
    assert (again / "PLAN.md").read_text() == "two\n"


def test_an_agent_that_forged_an_object_brings_nothing_back(tmp_path: Path) -> None:
    """The agent's repository is the agent's: a ref to an object it does not hold leaves the
    lane as it was (and the work stays where it is)."""
    worktrees = Worktrees(tmp_path / "data")
    tree = worktrees.ensure(RUN, "planner")
    lane = worktrees.repository_for(RUN, "planner").path
    own = worktrees.own_repository("default", "run-1", "planner")
    before = ref(lane, "refs/heads/squad/run-1/planner")
    (own / "refs" / "heads" / "squad" / "run-1" / "planner").parent.mkdir(parents=True, exist_ok=True)
    (own / "refs" / "heads" / "squad" / "run-1" / "planner").write_text("1" * 40 + "\n")
    worktrees.changes(RUN, "planner")
    assert ref(lane, "refs/heads/squad/run-1/planner") == before
    assert tree.exists()


def test_run_cleanup_removes_the_agents_repositories(tmp_path: Path) -> None:
    worktrees = Worktrees(tmp_path / "data")
    for agent in ("planner", "curator"):
        commit(worktrees.ensure(RUN, agent), f"{agent}.md", agent, f"Work of the {agent}")
    later = worktrees.ensure(LATER, "planner")
    removed, kept = worktrees.remove_run("default", "run-1")
    assert len(removed) == 2 and kept == []
    assert not (tmp_path / "data" / "agent-repos" / "default" / "run-1").exists()
    lane = worktrees.repository_for(RUN, "planner").path
    for agent in ("planner", "curator"):
        assert git("--git-dir", str(lane), "show", f"squad/run-1/{agent}:{agent}.md", cwd=tmp_path) == agent
    assert later.exists() and worktrees.is_worktree(later)  # another run's agent is untouched


def test_in_its_sandbox_an_agent_commits_and_reaches_no_other_branch(tmp_path: Path) -> None:
    worktrees = Worktrees(tmp_path / "data")
    planner, curator = worktrees.ensure(RUN, "planner"), worktrees.ensure(RUN, "curator")
    curators = commit(curator, "SOURCES.md", "sources\n", "Map the sources")
    worktrees.changes(RUN, "curator")
    earlier = worktrees.ensure(LATER, "planner")
    earlier_head = commit(earlier, "OLD.md", "old\n", "An earlier run's work")
    worktrees.changes(LATER, "planner")
    lane = worktrees.repository_for(RUN, "planner").path
    other = worktrees.own_repository("default", "run-1", "curator")
    attempts = {
        "commit": "git add -A && git -c user.name=p -c user.email=p@x commit -qm Plan",
        "lane_ref": f"git --git-dir={lane} update-ref refs/heads/squad/run-1/curator HEAD",
        "lane_ref_file": f"echo {'0' * 40} > {lane}/refs/heads/squad/run-2/planner",
        "lane_objects": f"rm -rf {lane}/objects/pack {lane}/objects/[0-9a-f][0-9a-f]",
        "lane_alternates": f"echo /elsewhere > {lane}/objects/info/alternates",
        "other_agent": f"git --git-dir={other} update-ref refs/heads/squad/run-1/curator HEAD",
        "own_alternates": "echo /elsewhere > \"$(git rev-parse --git-common-dir)/objects/info/alternates\"",
    }
    script = "".join(f"if ( {command} ) >/dev/null 2>&1; then echo {name}=ok; else echo {name}=refused; fi\n"
                     for name, command in attempts.items())
    (planner / "PLAN.md").write_text("# Plan\n")
    data = tmp_path / "data"
    config = LocalConfig(data_dir=data, base_url="http://127.0.0.1:9", command=f"/bin/sh -c {shlex.quote(script)}",
                         sandbox=sandbox.SandboxConfig(hidden=(data,)))
    assert not sandbox.unavailable(config.sandbox, forwarding=False), sandbox.unavailable(config.sandbox, False)
    session = SimpleNamespace(agent_id="planner", session_id="ses-1", role_key="role_planner", process_attempt=0,
                              process={"provider": "claude-code-cli", "model": ""})
    sockets = tmp_path / "net"  # (no forwarder listens: the script reaches nothing)
    sockets.mkdir()
    launch = prepare(config, RUN, session, planner, "token", "brief", git_dirs=worktrees.git_dirs(planner),
                     sockets=sockets, lent_objects=worktrees.lent_objects(planner))
    assert launch.sandbox is not None and launch.argv[0].endswith("bwrap")
    done = subprocess.run(launch.argv, cwd=planner, env=launch.env, capture_output=True, text=True,
                          timeout=60, check=False)
    seen = dict(line.split("=", 1) for line in done.stdout.split())
    assert seen == {"commit": "ok", **{name: "refused" for name in attempts if name != "commit"}}, done

    # The lane and the other agents' branches are as they were; the agent's commit arrives
    # through the plane.
    assert ref(lane, "refs/heads/squad/run-1/curator") == curators
    assert ref(lane, "refs/heads/squad/run-2/planner") == earlier_head
    git("--git-dir", str(lane), "fsck", "--connectivity-only", "--no-dangling", cwd=tmp_path)
    changes = worktrees.changes(RUN, "planner")
    assert changes is not None and changes.paths == ("PLAN.md",)
    assert git("--git-dir", str(lane), "show", "squad/run-1/planner:PLAN.md", cwd=tmp_path) == "# Plan"



def test_objects_the_agent_names_elsewhere_never_reach_the_lane(tmp_path: Path) -> None:
    """Inside its sandbox the agent can swap its repository's ``objects`` folder (renaming it
    takes the read-only ``objects/info`` with it) and name another tenant's objects in an
    ``alternates`` file, or link a loose object there; given a commit id of that tenant's, a
    bring-back made on the host would copy the commit into the agent's lane (for its next
    session to read). The plane packs inside the sandbox, where those objects are not there."""
    data = tmp_path / "data"
    other = data / "repos" / "other-tenant" / "acme" / "assembly.git"
    git("init", "--quiet", "--bare", str(other), cwd=tmp_path)
    blob = subprocess.run(["git", "--git-dir", str(other), "hash-object", "-w", "--stdin"], input="secret\n",
                          capture_output=True, text=True, check=True).stdout.strip()
    tree = subprocess.run(["git", "--git-dir", str(other), "mktree"], input=f"100644 blob {blob}\tSECRET.md\n",
                          capture_output=True, text=True, check=True).stdout.strip()
    secret = git("--git-dir", str(other), *AGENT, "commit-tree", tree, "-m", "theirs", cwd=tmp_path)
    worktrees = Worktrees(data, confine=sandbox.SandboxConfig(hidden=(data,)))
    worktrees.ensure(RUN, "planner")
    lane = worktrees.repository_for(RUN, "planner").path
    own = worktrees.own_repository("default", "run-1", "planner")
    # What the agent does in its sandbox, here on the host: its objects folder swapped for one
    # that names the other tenant's, and its branch set to the other tenant's commit.
    (own / "objects").rename(own / "objects-before")
    (own / "objects" / "info").mkdir(parents=True)
    (own / "objects" / "info" / "alternates").write_text(f"{lane / 'objects'}\n{other / 'objects'}\n")
    git("--git-dir", str(own), "update-ref", "refs/heads/squad/run-1/planner", secret, cwd=tmp_path)

    assert worktrees.changes(RUN, "planner") is None  # nothing brought: the lane has no such branch
    done = subprocess.run(["git", "--git-dir", str(lane), "cat-file", "-e", blob], capture_output=True, check=False)
    assert done.returncode != 0, "another tenant's object was copied into the lane"
    # The same, unconfined, would have copied it (what the sandbox is there for).
    Worktrees(data).changes(RUN, "planner")
    assert ref(lane, "refs/heads/squad/run-1/planner") == secret


def test_a_commondir_at_the_top_of_its_repository_names_no_configuration(tmp_path: Path) -> None:
    """git takes a repository's configuration from wherever its ``commondir`` file points:
    the agent's own repository is always named outright, so its configuration stays the
    plane's (here a smudge filter and a clean filter would run a command on the host)."""
    worktrees = Worktrees(tmp_path / "data")
    tree = worktrees.ensure(RUN, "planner")
    lane = worktrees.repository_for(RUN, "planner").path
    own = worktrees.own_repository("default", "run-1", "planner")
    marker = tmp_path / "ran-on-the-host"
    commit(tree, ".gitattributes", "* filter=x\n", "Attributes")
    evil = tree / ".evil"
    subprocess.run(["cp", "-r", str(own), str(evil)], check=True)
    for key in ("filter.x.clean", "filter.x.smudge"):
        git("--git-dir", str(evil), "config", key, f"touch {marker}; cat", cwd=tmp_path)
    (own / "commondir").write_text(f"{evil}\n")
    (tree / "NOTES.md").write_text("notes\n")

    worktrees.preserve(tree, "planner@agents.squadops.local", "kept")
    assert git("--git-dir", str(lane), "show", "squad/run-1/planner:NOTES.md", cwd=tmp_path) == "notes"
    (own / "commondir").write_text(f"{evil}\n")
    shutil.rmtree(tree)  # a worktree gone without the plane: made again from the lane
    again = worktrees.ensure(RUN, "planner")
    assert (again / "NOTES.md").read_text() == "notes\n"
    assert not marker.exists()


def test_a_worktree_of_the_lane_itself_moves_onto_the_agents_own_repository(tmp_path: Path) -> None:
    """A worktree made before agents had repositories of their own (of the lane repository,
    which its sandbox let it write) keeps its work and moves at its next start."""
    worktrees = Worktrees(tmp_path / "data")
    lane = worktrees.repository_for(RUN, "planner")
    worktrees.ensure_repository(lane)
    tree = worktrees.path_for("default", "run-1", "planner")
    tree.parent.mkdir(parents=True)
    git("worktree", "add", "--quiet", "-b", "squad/run-1/planner", str(tree), "main", cwd=lane.path)
    committed = commit(tree, "PLAN.md", "plan\n", "Plan")
    (tree / "NOTES.md").write_text("not committed\n")
    assert worktrees.git_dirs(tree) == [lane.path, lane.path / "worktrees" / "planner"]

    again = worktrees.ensure(RUN, "planner")
    own = worktrees.own_repository("default", "run-1", "planner")
    assert again == tree and worktrees.git_dirs(tree) == [own, own / "worktrees" / "planner"]
    assert (tree / "PLAN.md").read_text() == "plan\n" and (tree / "NOTES.md").read_text() == "not committed\n"
    head = ref(lane.path, "refs/heads/squad/run-1/planner")
    assert git("--git-dir", str(lane.path), "merge-base", "--is-ancestor", committed, head, cwd=tmp_path) == ""
    assert worktree_paths(lane.path) == [str(lane.path.resolve())]


def worktree_paths(repo: Path) -> list[str]:
    out = git("--git-dir", str(repo), "worktree", "list", "--porcelain", cwd=repo)
    return [line.removeprefix("worktree ") for line in out.splitlines() if line.startswith("worktree ")]
