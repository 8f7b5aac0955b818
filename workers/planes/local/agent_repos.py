"""The agents' own repositories: one per agent of a run, whose worktree the agent works in.

Each is bare, under ``<data>/agent-repos/<tenant>/<run_id>/<agent_id>.git``, and borrows the
lane repository's objects (``objects/info/alternates``, read-only in the sandbox): what the
agent commits lands in its own repository, and nothing it does there can reach the lane's
refs or objects, nor another agent's. ``bring_back`` is the one way its work enters the lane:
the objects the lane lacks as a pack, made inside the sandbox where only the agent's
repository and the lane are there to read (the agent can plant links, an ``alternates`` file
or a ``commondir`` in its repository, naming another tenant's objects: there they name
nothing), which ``index-pack`` checks object by object on the host; then the refs, once the
lane holds everything they reach, by ``update-ref`` with the value read before (a head the
agent rewrote stays under ``refs/squadops/kept/``).

What the agent can write is never taken as an instruction on the host: which lane a
repository belongs to is the plane's own record beside it (``<agent_id>.lane``, out of the
sandbox's reach), and git on the host names the repository outright (``git_env``: its
configuration is the plane's, read-only to the agent, whatever ``commondir`` says).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
from pathlib import Path

from domain.studio.brief import branch_name
from workers.planes.local import sandbox
from workers.planes.local.host_git import WorktreeError, git, plumbing, small_text

SHA = re.compile(r"[0-9a-f]{40}")
NO_REF = "0" * 40
# Refs of an agent's repository besides its branch (a tag, a stash, work on another branch)
# are brought into the lane under ``refs/squadops/agents/<run>/<agent>/``: so many at most.
AGENT_REF = re.compile(r"refs/[A-Za-z0-9._-][A-Za-z0-9._/-]{0,199}")
MAX_REFS = 200
# The pack of what the lane lacks, made where the sandbox lets git read only the agent's
# repository and the lane (its private /tmp holds the list: a failed walk packs nothing).
PACK = 'git rev-list --objects "$@" --not --all >/tmp/objects && git pack-objects --stdout --quiet </tmp/objects'


def make(own: Path, lane: Path, default_branch: str, branch: str) -> Path:
    """The agent's repository, made when missing: bare, borrowing the lane's objects, with the
    agent's branch where the lane has it (else at the lane's default branch) and the default
    branch beside it. Made under another name and renamed into place, so that a repository
    found there is whole."""
    if (own / "HEAD").exists():
        return own
    default = f"refs/heads/{default_branch}"
    tips = _tips(lane, {f"refs/heads/{branch}", default})
    start = tips.get(f"refs/heads/{branch}") or tips.get(default)
    if not start:
        raise WorktreeError(f"the lane repository {lane.name} has no {default_branch} branch")
    own.parent.mkdir(parents=True, exist_ok=True)
    making = own.with_name(f".{own.name}.{os.getpid()}.{threading.get_ident()}")
    shutil.rmtree(making, ignore_errors=True)
    # (no templates: an empty hooks folder, read-only in the sandbox like the configuration)
    git("init", "--bare", "--quiet", "--template=", f"--initial-branch={default_branch}", "--", str(making))
    (making / "hooks").mkdir()
    (making / "objects" / "info" / "alternates").write_text(f"{(lane / 'objects').resolve()}\n")
    refs = {f"refs/heads/{branch}": start}
    if branch != default_branch and default in tips:
        refs[default] = tips[default]
    git("update-ref", "--stdin", cwd=making, stdin="".join(f"create {ref} {sha}\n" for ref, sha in refs.items()))
    record(own).write_text(f"{lane.resolve()}\n")  # (first: a repository there always has its record)
    shutil.rmtree(own, ignore_errors=True)  # (a folder without HEAD holds nothing of an agent's)
    os.replace(making, own)
    return own


def record(own: Path) -> Path:
    """The plane's record of the lane ``own`` belongs to (beside it, never in the sandbox)."""
    return own.with_name(own.name.removesuffix(".git") + ".lane")


def git_env(own: Path) -> dict[str, str]:
    """git's repository for the plane's commands in ``own``, named outright; a ``commondir``
    file the agent put at its top (git would take its configuration from there) goes."""
    with contextlib.suppress(FileNotFoundError):
        (own / "commondir").unlink()
    return {"GIT_DIR": str(own), "GIT_COMMON_DIR": str(own)}


def lane_of(own: Path, repos: Path) -> Path | None:
    """The lane repository ``own`` was made from (the plane's record): one under ``repos``
    (the plane's lane repositories of the data directory), else None."""
    named = small_text(record(own)).strip().splitlines()
    if len(named) != 1:
        return None
    lane = Path(named[0])
    try:
        rel = lane.resolve().relative_to(repos.resolve())
    except (OSError, ValueError):
        return None
    if len(rel.parts) != 3 or not rel.parts[-1].endswith(".git") or not (lane / "HEAD").is_file():
        return None
    return lane


def bring_back(
    own: Path, lane: Path, run_id: str, agent_id: str, confine: sandbox.SandboxConfig | None = None,
) -> dict[str, str]:
    """Brings the agent's branch, and each other ref of its repository whose commit the lane
    lacks, into the lane repository; answers the lane refs it moved and where to. ``confine``
    is the agents' sandbox (None: git reads the agent's repository unconfined, as the agents
    ran)."""
    branch = f"refs/heads/{branch_name(run_id, agent_id)}"
    refs = _refs(own)
    present = _present(lane, set(refs.values()))
    moves: dict[str, str] = {}
    if branch in refs:  # (first: a ref the lane refuses leaves the branch brought all the same)
        moves[branch] = refs[branch]
    for ref, sha in refs.items():
        if ref != branch and sha not in present:
            moves[f"refs/squadops/agents/{run_id}/{agent_id}/{ref.removeprefix('refs/')}"] = sha
    tips = _tips(lane, set(moves))
    before = {ref: tips.get(ref, "") for ref in moves}
    moves = {ref: sha for ref, sha in moves.items() if before[ref] != sha}
    if not moves:
        return {}
    missing = sorted({sha for sha in moves.values() if sha not in present})
    if missing:  # (an object the lane holds has everything it reaches there: the lane takes only whole packs)
        plumbing(["git", "-c", f"core.hooksPath={os.devnull}", "--git-dir", str(lane), "index-pack", "--stdin",
                  "--fix-thin"], _pack(own, lane, missing, confine))
        # Everything each ref reaches is in the lane now (git fails on a missing object).
        git("rev-list", "--objects", *missing, "--not", "--all", cwd=lane)
    for ref, sha in moves.items():
        old = before[ref]
        if old and not _is_ancestor(lane, old, sha):  # rewritten: the earlier head stays in a ref
            git("update-ref", f"refs/squadops/kept/{run_id}/{agent_id}/{old}", old, cwd=lane)
        git("update-ref", ref, sha, old or NO_REF, cwd=lane)
    return moves


def _pack(own: Path, lane: Path, tips: list[str], confine: sandbox.SandboxConfig | None) -> bytes:
    """A pack of the objects ``tips`` reach that the lane lacks, read from the agent's
    repository (lent to git as an alternate object store) and the lane."""
    env = {"GIT_DIR": str(lane.resolve()), "GIT_ALTERNATE_OBJECT_DIRECTORIES": str((own / "objects").resolve())}
    if confine is None:
        wanted = git("rev-list", "--objects", *tips, "--not", "--all", cwd=lane, env=env, raw=True)
        return plumbing(["git", "pack-objects", "--stdout", "--quiet"], wanted.encode(), env=env) if wanted else b""
    argv = sandbox.bwrap_argv(confine, ["/bin/sh", "-c", PACK, "bring-back", *tips], cwd=lane.resolve(), writable=[],
                              read_only_files=[own.resolve(), lane.resolve()])
    return plumbing(argv, b"", env=env)


def _tips(repository: Path, refs: set[str]) -> dict[str, str]:
    """Where each of ``refs`` points in ``repository`` (those that exist), in one call."""
    listing = git("for-each-ref", "--format=%(refname) %(objectname)", *sorted(refs), cwd=repository)
    pairs = (line.split(" ", 1) for line in listing.splitlines() if " " in line)
    return {ref: sha for ref, sha in pairs if ref in refs}


def _refs(own: Path) -> dict[str, str]:
    """The agent repository's refs (named as git allows and this plane takes), by name."""
    refs: dict[str, str] = {}
    for line in git("for-each-ref", "--format=%(objectname) %(refname)", cwd=own, env=git_env(own)).splitlines():
        sha, _, ref = line.partition(" ")
        if SHA.fullmatch(sha) and AGENT_REF.fullmatch(ref) and ".." not in ref and len(refs) < MAX_REFS:
            refs[ref] = sha
    return refs


def _present(lane: Path, shas: set[str]) -> set[str]:
    """Which of ``shas`` the lane repository holds (its own objects only)."""
    if not shas:
        return set()
    answer = git("cat-file", "--batch-check", cwd=lane, stdin="".join(f"{sha}\n" for sha in sorted(shas)))
    return {line.split()[0] for line in answer.splitlines() if line and not line.endswith(" missing")}


def _is_ancestor(lane: Path, old: str, new: str) -> bool:
    try:
        git("merge-base", "--is-ancestor", old, new, cwd=lane)
    except WorktreeError:
        return False
    return True
