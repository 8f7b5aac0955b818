"""A team brings the repository it already has: the project factory mirrors an existing local
repository as the binding's repository (a bare clone in the tenant's storage), refuses every
source git must not read (422 with git's own first line, nothing created), and fetches the
mirror again before each run, recording it. The operator's source policy holds at the
boundary: local sources under SQUADOPS_SOURCE_LOCAL_ROOTS only, network sources on public
addresses only (SQUADOPS_SOURCE_PRIVATE_HOSTS allows an in-house server), no HTTP redirect
followed, and a stored source a changed setting now refuses is not fetched at launch."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from tests.conftest import ADMIN, admin_api
from tests.helpers import eventually

PROJECTS = "/v1/project-factory/projects"
OTHER_TENANT = {**ADMIN, "X-Squadops-Tenant-Id": "other"}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )
    return done.stdout.strip()


def make_origin(root: Path, files: dict[str, str], branch: str = "main") -> Path:
    """A team's existing (non-bare) repository with one commit of ``files``."""
    root.mkdir(parents=True)
    git(root, "init", "--quiet", f"--initial-branch={branch}")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "The team's first commit")
    return root


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    data = tmp_path / "data"
    with admin_api(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(data)) as (http, _):
        yield http, data


@pytest.fixture
def served_private(tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    """The service of an operator who lets bindings bring repositories from internal hosts."""
    data = tmp_path / "data"
    with admin_api(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(data), source_private_hosts=True) as (http, _):
        yield http, data


def project(slug: str, source: str, **binding: object) -> dict:
    return {
        "project_key": slug,
        "repository_bindings": [
            {"repository_key": "backend", "vcs_repo_slug": f"{slug}/api", "source_repository_url": source, **binding},
        ],
    }


def test_an_existing_repository_is_mirrored_as_the_bindings_repository(served: tuple[TestClient, Path], tmp_path: Path) -> None:
    http, data = served
    origin = make_origin(tmp_path / "team-repo", {"README.md": "# The team's service\n", "app.py": "print('hi')\n"})
    answer = http.post(PROJECTS, json=project("acme", str(origin)))
    assert answer.status_code == 201, answer.text
    binding = answer.json()["repository_bindings"][0]
    assert binding["metadata"]["vcs_repo_provision_status"] == "mirrored"
    assert binding["metadata"]["source_repository_url"] == str(origin)
    mirror = data / "vcs" / "default" / "acme" / "api.git"
    assert git(mirror, "rev-parse", "refs/heads/main") == git(origin, "rev-parse", "HEAD") == binding["metadata"]["vcs_repo_node_id"]
    assert git(mirror, "show", "main:app.py") == "print('hi')"
    assert git(mirror, "config", "--get", "remote.origin.url") == str(origin)
    http.headers["X-Squadops-Min-Position"] = answer.headers["X-Squadops-Position"]
    assert http.get(f"{PROJECTS}/acme").json()["repository_bindings"] == answer.json()["repository_bindings"]


def test_credentials_in_a_source_url_are_never_shown() -> None:
    from domain.projects.sources import redact

    assert redact("https://bot:s3cret@git.example.com/team/repo.git") == "https://git.example.com/team/repo.git"
    assert redact("/srv/git/repo") == "/srv/git/repo"


def refused(http: TestClient, data: Path, slug: str, source: str, branch: str = "main") -> dict:
    answer = http.post(PROJECTS, json=project(slug, source, default_branch=branch))
    assert answer.status_code == 422, (source, answer.text)
    detail = answer.json()["detail"]
    assert detail[0]["loc"] == ["body", "repository_bindings", 0, "source_repository_url"], detail
    assert http.get(f"{PROJECTS}/{slug}").status_code == 404  # nothing was created
    assert not (data / "vcs" / "default" / slug).exists()
    return detail[0]


def test_a_source_git_cannot_read_is_a_422_with_gits_first_line(served: tuple[TestClient, Path], tmp_path: Path) -> None:
    http, data = served
    missing = refused(http, data, "missing", str(tmp_path / "no-such-repo"))
    assert missing["msg"].startswith("fatal: ") and "no-such-repo" in missing["msg"] and "\n" not in missing["msg"]
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    assert refused(http, data, "plain", str(plain))["msg"].startswith("fatal: ")
    origin = make_origin(tmp_path / "trunk-only", {"a.txt": "a\n"}, branch="trunk")
    assert "no branch 'main'" in refused(http, data, "nobranch", str(origin))["msg"]


def test_an_internal_host_the_operator_allows_is_a_422_with_gits_first_line(
    served_private: tuple[TestClient, Path],
) -> None:
    http, data = served_private
    unreachable = refused(http, data, "unreachable", "http://127.0.0.1:9/team/repo.git")
    assert unreachable["msg"].startswith("fatal: ") and "127.0.0.1" in unreachable["msg"]
    secret = refused(http, data, "secret", "http://bot:s3cret@127.0.0.1:9/team/repo.git")
    assert "s3cret" not in str(secret["input"]) and "s3cret" not in secret["msg"]


def test_a_brought_repository_is_always_mirrored(served: tuple[TestClient, Path], tmp_path: Path) -> None:
    http, data = served
    origin = make_origin(tmp_path / "team-repo", {"README.md": "# Team\n"})
    for body in (project("nomirror", str(origin), create_vcs_repo=False),
                 {**project("nomirror", str(origin)), "create_vcs_repo": False}):
        answer = http.post(PROJECTS, json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"][0]["loc"] == ["body", "repository_bindings", 0, "create_vcs_repo"]
    assert http.get(f"{PROJECTS}/nomirror").status_code == 404


INJECTIONS = [
    "ext::sh -c touch% /tmp/squadops-pwned",
    "ext::touch",
    "fd::3",
    "--upload-pack=touch /tmp/squadops-pwned",
    "-oProxyCommand=touch",
    "--config=core.sshCommand=touch",
    "ssh://git.example.com/team/repo.git",
    "git@github.com:team/repo.git",
    "relative/path/repo",
    "https://",
    "https://-oProxyCommand=x/repo",
    "file://remote-host/srv/repo",
    "/srv/repo\n--upload-pack=touch",
    "/srv/../etc/repo",
]


@pytest.mark.parametrize("source", INJECTIONS)
def test_injection_attempts_are_refused_before_git_runs(served: tuple[TestClient, Path], source: str) -> None:
    http, data = served
    refused(http, data, "injected", source)
    assert not Path("/tmp/squadops-pwned").exists()


def test_the_services_own_data_and_other_tenants_repositories_are_no_source(
    served: tuple[TestClient, Path], tmp_path: Path
) -> None:
    http, data = served
    theirs = http.post(
        PROJECTS, headers=OTHER_TENANT,
        json={"project_key": "secret", "repository_bindings": [{"repository_key": "backend", "vcs_repo_slug": "secret/api"}]},
    )
    assert theirs.status_code == 201, theirs.text
    other_repo = data / "vcs" / "other" / "secret" / "api.git"
    assert (other_repo / "HEAD").exists()
    for source in (str(other_repo), f"file://{other_repo}", str(data), str(data / "vcs" / "other" / "secret" / ".." / "secret" / "api.git")):
        detail = refused(http, data, "stealer", source)
        assert detail["msg"] in ("source_repository_url must not lead into the service's own data",
                                 "source_repository_url must not hold '..'"), detail
    link = tmp_path / "innocent-looking"
    link.symlink_to(other_repo)
    assert refused(http, data, "stealer", str(link))["msg"] == "source_repository_url must not lead into the service's own data"
    # git decodes a file URL's escapes: '%76cs' would be read as 'vcs', past the path checked.
    escaped = f"file://{data}/%76cs/other/secret/api.git"
    assert refused(http, data, "stealer", escaped)["msg"] == "a file URL must not hold percent escapes; give the path as it is"


# -- the operator's source policy: local roots, public hosts, no redirects ---------------------

PRIVATE_HOSTS_REFUSAL = (
    "source_repository_url must name a public host: loopback, private, link-local and unspecified addresses "
    "(and names resolving to one) are refused unless the operator sets SQUADOPS_SOURCE_PRIVATE_HOSTS=1"
)


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    """A port on this machine that records whether anything connected to it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.setblocking(False)
        yield server, server.getsockname()[1]


def nobody_connected(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return True
    return False


def test_a_tenant_cannot_make_the_service_probe_its_internal_network(
    served: tuple[TestClient, Path], listener: tuple[socket.socket, int],
) -> None:
    """A contributor names loopback, private, link-local and metadata addresses in every
    spelling git or libcurl would read: each is a 422 saying why, without git's output (no
    oracle), nothing is created, and nothing connects to the port they named."""
    http, data = served
    http.headers.update(CONTRIBUTOR)
    server, port = listener
    sources = [
        f"http://127.0.0.1:{port}/team.git", f"http://2130706433:{port}/team.git", f"http://0x7f.1:{port}/x",
        f"http://0177.0.0.1:{port}/x", f"http://127.1:{port}/x", f"https://localhost:{port}/x",
        f"git://localhost:{port}/x", f"http://[::ffff:127.0.0.1]:{port}/x", f"http://bot:s3cret@localhost:{port}/x",
        "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/x", "http://10.0.0.1/x", "http://192.168.1.1/x",
        "http://172.16.0.1/x", "http://[fd00::1]/x", "http://0.0.0.0/x", "http://[::]/x", "http://[::1]/x",
    ]
    for source in sources:
        detail = refused(http, data, "probe", source)
        assert detail["msg"] == PRIVATE_HOSTS_REFUSAL, (source, detail)
        assert "s3cret" not in str(detail["input"])
    assert nobody_connected(server)


@contextlib.contextmanager
def serve_http(root: Path, redirect_to: str = "") -> Iterator[int]:
    """An http server on loopback: git's dumb protocol over ``root``, or (``redirect_to``) a
    302 of every request to the same path there."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if not redirect_to:
                super().do_GET()
                return
            self.send_response(302)
            self.send_header("Location", f"{redirect_to}{self.path}")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_an_in_house_http_server_the_operator_allows_but_never_a_redirect(
    served_private: tuple[TestClient, Path], tmp_path: Path,
) -> None:
    http, data = served_private
    served_root = tmp_path / "served"
    served_root.mkdir()
    team = make_origin(tmp_path / "team", {"README.md": "# Team\n"})
    subprocess.run(["git", "clone", "--quiet", "--bare", str(team), str(served_root / "team.git")], check=True)
    git(served_root / "team.git", "update-server-info")
    with contextlib.ExitStack() as stack:
        port = stack.enter_context(serve_http(served_root))
        hop = stack.enter_context(serve_http(served_root, f"http://127.0.0.1:{port}"))
        # A redirect (here to a server that would answer) is an error: git follows none.
        detail = refused(http, data, "redirected", f"http://127.0.0.1:{hop}/team.git")
        assert detail["msg"].startswith("fatal: ") and "302" in detail["msg"], detail
        answer = http.post(PROJECTS, json=project("inhouse", f"http://127.0.0.1:{port}/team.git"))
        assert answer.status_code == 201, answer.text
    mirror = data / "vcs" / "default" / "inhouse" / "api.git"
    assert git(mirror, "rev-parse", "refs/heads/main") == git(team, "rev-parse", "HEAD")


def test_git_connects_to_the_addresses_the_policy_checked_not_its_own_resolution(tmp_path: Path) -> None:
    """An http(s) host name is pinned (``http.curloptResolve``) to the addresses the policy
    resolved: ``git.test`` (a reserved name no resolver answers) reaches the server only
    because git was told where the policy found it, so a name rebound between the check and
    git's connection would not move git."""
    from domain.projects.sources import SourceError, SourcePolicy
    from workers.adapters.local_git import LocalGitVcs

    served_root = tmp_path / "served"
    served_root.mkdir()
    team = make_origin(tmp_path / "team", {"README.md": "# Team\n"})
    subprocess.run(["git", "clone", "--quiet", "--bare", str(team), str(served_root / "team.git")], check=True)
    git(served_root / "team.git", "update-server-info")
    checked = {"git.test": ["127.0.0.1"]}
    policy = SourcePolicy(resolve=lambda host, port: checked.get(host, []), private_hosts=True)
    vcs = LocalGitVcs(tmp_path / "vcs", "https://vcs.example", source_policy=policy)
    with serve_http(served_root) as port:
        url = f"http://git.test:{port}/team.git"
        vcs.probe(url, "main")
        mirrored = vcs.mirror_repository(tenant="default", repo_slug="acme/api", url=url, default_branch="main")
        assert mirrored.node_id == git(team, "rev-parse", "HEAD")
        assert vcs.fetch(tenant="default", repo_slug="acme/api", default_branch="main").head_sha == mirrored.node_id
        checked["git.test"] = []  # the name resolves no more: nothing reads it
        with pytest.raises(SourceError, match="does not resolve"):
            vcs.fetch(tenant="default", repo_slug="acme/api", default_branch="main")


def test_a_git_url_is_read_and_pushed_at_the_address_the_policy_checked(tmp_path: Path) -> None:
    """``git://`` has no curloptResolve: git is handed the URL with the host replaced by the
    address checked (``url.<it>.insteadOf``). ``rebind.test`` (a reserved name no resolver
    answers) reaches the daemon for the probe, the clone, the fetch and the push only because
    git connected where the policy found it; the mirror's origin and the push keep the name."""
    from domain.projects.sources import SourcePolicy
    from workers.adapters.local_git import LocalGitVcs

    served_root = tmp_path / "served"
    served_root.mkdir()
    team = make_origin(tmp_path / "team", {"README.md": "# Team\n"})
    subprocess.run(["git", "clone", "--quiet", "--bare", str(team), str(served_root / "team.git")], check=True)
    policy = SourcePolicy(resolve=lambda host, port: ["127.0.0.1"] if host == "rebind.test" else [], private_hosts=True)
    vcs = LocalGitVcs(tmp_path / "vcs", "https://vcs.example", source_policy=policy)
    for base_url in git_daemon(served_root, writable=True):
        url = base_url.replace("127.0.0.1", "rebind.test") + "/team.git"
        vcs.probe(url, "main")
        mirrored = vcs.mirror_repository(tenant="default", repo_slug="acme/api", url=url, default_branch="main")
        assert mirrored.node_id == git(team, "rev-parse", "HEAD")
        mirror = tmp_path / "vcs" / "default" / "acme" / "api.git"
        assert git(mirror, "config", "--get", "remote.origin.url") == url
        assert vcs.fetch(tenant="default", repo_slug="acme/api", default_branch="main").head_sha == mirrored.node_id
        git(mirror, "branch", "squad/feature", "main")
        pushed = vcs.for_tenant("default").push_upstream("acme/api", "squad/feature")
        assert pushed is not None and (pushed.status, pushed.origin) == ("pushed", url), pushed
        assert git(served_root / "team.git", "rev-parse", "refs/heads/squad/feature") == mirrored.node_id


def test_a_push_to_a_local_origin_runs_nothing_its_configuration_names(tmp_path: Path) -> None:
    """Whoever can write under a root controls a local origin's hooks and configuration, and
    receive-pack runs there as the service's user: the push-back runs none of its hooks and
    none of the commands its configuration names, and still lands the branch."""
    from domain.projects.sources import SourcePolicy
    from workers.adapters.local_git import LocalGitVcs

    team = make_origin(tmp_path / "team", {"README.md": "# Team\n"})
    origin = tmp_path / "team.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(team), str(origin)], check=True)
    ran = tmp_path / "ran"
    ran.mkdir()
    hooks = ("pre-receive", "update", "post-receive", "post-update", "reference-transaction", "proc-receive",
             "push-to-checkout", "pre-auto-gc")
    for hook in hooks:
        script = origin / "hooks" / hook
        script.write_text(f"#!/bin/sh\ncat >/dev/null\ntouch {ran / hook}\n")
        script.chmod(0o755)
    git(origin, "config", "core.alternateRefsCommand", f"touch {ran / 'alternate-refs'}; true")
    git(origin, "config", "receive.autogc", "true")
    git(origin, "config", "gc.auto", "1")
    git(origin, "config", "core.fsmonitor", f"touch {ran / 'fsmonitor'}; true")

    policy = SourcePolicy(resolve=lambda host, port: [], local_roots=(tmp_path.resolve(),))
    vcs = LocalGitVcs(tmp_path / "vcs", "https://vcs.example", source_policy=policy)
    mirrored = vcs.mirror_repository(tenant="default", repo_slug="acme/api", url=str(origin), default_branch="main")
    git(tmp_path / "vcs" / "default" / "acme" / "api.git", "branch", "squad/feature", "main")
    pushed = vcs.for_tenant("default").push_upstream("acme/api", "squad/feature")
    assert pushed is not None and pushed.status == "pushed", pushed
    assert git(origin, "rev-parse", "refs/heads/squad/feature") == mirrored.node_id
    assert sorted(p.name for p in ran.iterdir()) == []


def test_local_sources_lie_under_the_operators_roots(tmp_path: Path) -> None:
    allowed, elsewhere, data = tmp_path / "allowed", tmp_path / "elsewhere", tmp_path / "data"
    ours = make_origin(allowed / "team", {"README.md": "# Team\n"})
    theirs = make_origin(elsewhere / "other-project", {"secret.txt": "not yours\n"})
    (allowed / "escape").symlink_to(theirs)
    with admin_api(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(data),
                   source_local_roots=f"{tmp_path / 'nothing-here'}:{allowed}") as (http, _):
        http.headers.update(CONTRIBUTOR)
        for source in (str(theirs), f"file://{theirs}", str(allowed / "escape"), f"file://{allowed / 'escape'}",
                       str(Path(__file__).resolve().parents[2])):  # the service's own checkout
            detail = refused(http, data, "stealer", source)
            assert detail["msg"] == "source_repository_url must lie under a directory SQUADOPS_SOURCE_LOCAL_ROOTS names"
        answer = http.post(PROJECTS, json=project("acme", str(ours)))
        assert answer.status_code == 201, answer.text
        assert answer.json()["repository_bindings"][0]["metadata"]["vcs_repo_provision_status"] == "mirrored"


def attacker_repositories(allowed: Path, theirs: Path, sha: str) -> dict[str, str]:
    """Repositories a tenant who may write under an allowed root crafts there, each of which
    would have git read another tenant's mirror (``theirs``, holding commit ``sha``) from
    the service's data: the source passes the path check, git follows where it leads."""
    allowed.mkdir(parents=True, exist_ok=True)

    def bare(name: str) -> Path:
        repo = allowed / name
        subprocess.run(["git", "init", "--quiet", "--bare", str(repo)], check=True)
        return repo

    def pointing(name: str) -> Path:  # a ref at their commit, the objects to come from elsewhere
        repo = bare(name)
        (repo / "refs" / "heads" / "main").write_text(f"{sha}\n")
        return repo

    (allowed / "gitfile").mkdir()
    (allowed / "gitfile" / ".git").write_text(f"gitdir: {theirs}\n")
    (allowed / "relative" / "deeper").mkdir(parents=True)
    (allowed / "relative" / "deeper" / ".git").write_text(f"gitdir: {os.path.relpath(theirs, allowed / 'relative' / 'deeper')}")
    (allowed / "linked").mkdir()
    (allowed / "linked" / ".git").symlink_to(theirs)
    (bare("commondir.git") / "commondir").write_text(f"{os.path.relpath(theirs, allowed / 'commondir.git')}\n")
    (bare("gitfile-in-bare.git") / ".git").write_text(f"gitdir: {theirs}\n")
    (allowed / "suffixed.git").symlink_to(theirs)  # git tries <path>.git when <path> is none
    (allowed / "dotted").mkdir()
    (allowed / "dotted" / "..git").symlink_to(theirs)  # '<path>/.' + '.git'
    (pointing("alternates.git") / "objects" / "info" / "alternates").write_text(f"{theirs / 'objects'}\n")
    relative = os.path.relpath(theirs / "objects", allowed / "alternates-relative.git" / "objects")
    (pointing("alternates-relative.git") / "objects" / "info" / "alternates").write_text(f"# a comment\n{relative}\n")
    (bare("hop.git") / "objects" / "info" / "alternates").write_text(f"{theirs / 'objects'}\n")
    (pointing("alternates-chained.git") / "objects" / "info" / "alternates").write_text("../../hop.git/objects\n")
    linked_objects = pointing("objects-linked.git")
    shutil.rmtree(linked_objects / "objects")
    (linked_objects / "objects").symlink_to(theirs / "objects")
    fanned = pointing("fanout-linked.git")  # every loose-object directory a name may have
    for prefix in range(256):
        (fanned / "objects" / f"{prefix:02x}").symlink_to(theirs / "objects" / f"{prefix:02x}")
    return {
        "gitfile": str(allowed / "gitfile"), "relative": str(allowed / "relative" / "deeper"),
        "linked": f"file://{allowed / 'linked'}", "commondir": str(allowed / "commondir.git"),
        "gitfile-in-bare": str(allowed / "gitfile-in-bare.git"), "suffixed": str(allowed / "suffixed"),
        "dotted": f"{allowed / 'dotted'}/.", "alternates": str(allowed / "alternates.git"),
        "alternates-relative": str(allowed / "alternates-relative.git"),
        "alternates-chained": str(allowed / "alternates-chained.git"), "objects-linked": str(allowed / "objects-linked.git"),
        "fanout-linked": str(allowed / "fanout-linked.git"),
    }


@pytest.mark.parametrize("roots", [False, True])
def test_a_repository_under_an_allowed_root_cannot_lead_git_into_another_tenants_mirror(tmp_path: Path, roots: bool) -> None:
    """A ``.git`` file (absolute or relative), a ``.git`` symlink, ``commondir``, git's
    ``<path>.git`` and ``<path>/.`` spellings, alternates (absolute, relative, chained) and
    symlinked object directories: each a 422 naming what leads out, nothing created, nothing
    read (before these checks, each was cloned: 201 with the other tenant's commit)."""
    data, allowed = tmp_path / "data", tmp_path / "allowed"
    settings = {"source_local_roots": str(allowed)} if roots else {}
    with admin_api(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(data), **settings) as (http, _):
        theirs = http.post(PROJECTS, headers=OTHER_TENANT, json={
            "project_key": "secret", "repository_bindings": [{"repository_key": "backend", "vcs_repo_slug": "secret/api"}]})
        assert theirs.status_code == 201, theirs.text
        their_repo = data / "vcs" / "other" / "secret" / "api.git"
        sources = attacker_repositories(allowed, their_repo, git(their_repo, "rev-parse", "refs/heads/main"))
        http.headers.update(CONTRIBUTOR)
        for name, source in sources.items():
            detail = refused(http, data, "stealer", source)
            assert detail["msg"].startswith("source_repository_url's ") and detail["msg"].endswith(
                "must not lead into the service's own data"), (name, detail)
        # git reads '?' and '#' in a file URL as part of the path: '<root>/x#/../../data/…'.
        (allowed / "x#").mkdir()
        escaped = f"file://{allowed}/x#/../../data/vcs/other/secret/api.git"
        assert refused(http, data, "stealer", escaped)["msg"] == "a file URL must not hold '?' or '#'; give the path as it is"
        # Alternates and a .git file within the allowed roots are a repository like any other.
        ours = make_origin(allowed / "ours", {"README.md": "# Ours\n"})
        fork = allowed / "fork.git"
        subprocess.run(["git", "clone", "--quiet", "--bare", "--shared", str(ours), str(fork)], check=True)
        (allowed / "checkout").mkdir()
        (allowed / "checkout" / ".git").write_text("gitdir: ../fork.git\n")
        for slug, source in (("fork", str(fork)), ("checkout", str(allowed / "checkout"))):
            answer = http.post(PROJECTS, json=project(slug, source))
            assert answer.status_code == 201, answer.text
            assert git(data / "vcs" / "default" / slug / "api.git", "rev-parse", "refs/heads/main") == git(ours, "rev-parse", "HEAD")


def test_a_local_repository_under_a_root_that_leads_elsewhere_is_refused(tmp_path: Path) -> None:
    """Under SQUADOPS_SOURCE_LOCAL_ROOTS, a repository whose alternates or .git file lead
    outside the roots (not only into the data) is refused the same way."""
    data, allowed, elsewhere = tmp_path / "data", tmp_path / "allowed", tmp_path / "elsewhere"
    outside = make_origin(elsewhere / "other-project", {"secret.txt": "not yours\n"})
    sources = attacker_repositories(allowed, outside / ".git", git(outside, "rev-parse", "HEAD"))
    with admin_api(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(data), source_local_roots=str(allowed)) as (http, _):
        http.headers.update(CONTRIBUTOR)
        for name in ("gitfile", "alternates-relative", "objects-linked", "suffixed"):
            detail = refused(http, data, "stealer", sources[name])
            assert detail["msg"].startswith("source_repository_url's ") and detail["msg"].endswith(
                "must lie under a directory SQUADOPS_SOURCE_LOCAL_ROOTS names"), (name, detail)


def test_production_brings_no_local_source_unless_the_operator_names_roots(tmp_path: Path) -> None:
    data = tmp_path / "data"
    origin = make_origin(tmp_path / "team", {"README.md": "# Team\n"})
    with admin_api(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(data), env="production") as (http, _):
        detail = refused(http, data, "acme", str(origin))
        assert detail["msg"] == ("local sources are refused here: SQUADOPS_SOURCE_LOCAL_ROOTS names no directory "
                                 "a source may lie under")
        assert refused(http, data, "acme", f"file://{origin}")["msg"] == detail["msg"]


def test_a_source_a_changed_setting_refuses_is_not_fetched_at_launch(tmp_path: Path) -> None:
    data, database = tmp_path / "data", f"sqlite:///{tmp_path / 'db.sqlite'}"
    origin = make_origin(tmp_path / "team-repo", {"README.md": "# Team\n"})
    base = git(origin, "rev-parse", "HEAD")
    with admin_api(database, data_dir=str(data)) as (http, _):
        assert http.post(PROJECTS, json=project("acme", str(origin))).status_code == 201
    (origin / "CHANGELOG.md").write_text("a change made by the team meanwhile\n")
    git(origin, "add", "CHANGELOG.md")
    git(origin, "commit", "--quiet", "-m", "Meanwhile")
    # The operator restarts the service with local sources confined elsewhere.
    with admin_api(database, data_dir=str(data), source_local_roots=str(tmp_path / "approved")) as (http, _):
        run = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
        assert run.status_code == 201, run.text
        http.headers["X-Squadops-Min-Position"] = run.headers["X-Squadops-Position"]
        fetch = http.get(f"{PROJECTS}/acme").json()["repository_bindings"][0]["metadata"]["last_fetch"]
        assert (fetch["run_id"], fetch["status"], fetch["head_sha"]) == (run.json()["run_id"], "failed", "")
        assert fetch["error"] == "source_repository_url must lie under a directory SQUADOPS_SOURCE_LOCAL_ROOTS names"
    assert git(data / "vcs" / "default" / "acme" / "api.git", "rev-parse", "refs/heads/main") == base  # not fetched


def test_openapi_documents_the_source(served: tuple[TestClient, Path]) -> None:
    http, _ = served
    schema = http.get("/openapi.json").json()
    binding = schema["components"]["schemas"]["RepositoryBindingIn"]["properties"]["source_repository_url"]
    assert "mirror" in binding["description"] and binding["maxLength"] == 2048


# -- the journey on the simulator plane: mirror, a lane's pull request, review, publish --------------

# The client sends the operator's headers by default: each person names no group of theirs.
CONTRIBUTOR = {"x-edge-claim-email": "dev@example.com", "x-edge-claim-groups": ""}
VIEWER = {"x-edge-claim-email": "viewer@example.com", "x-edge-claim-groups": ""}
MAINTAINER = {"x-edge-claim-email": "lead@example.com", "x-edge-claim-groups": ""}
STRANGER = {"x-edge-claim-email": "stranger@example.com", "x-edge-claim-groups": ""}
PARTICIPANTS = [
    {"subject_key": "dev@example.com", "project_role": "contributor"},
    {"subject_key": "viewer@example.com", "project_role": "viewer"},
    {"subject_key": "lead@example.com", "project_role": "maintainer"},
]


@contextlib.contextmanager
def open_squad(tmp_path: Path, **changes: object) -> Iterator[tuple[TestClient, Path, object]]:
    """The service with its projector and ticker on the simulator plane; lanes wait for review."""
    data = tmp_path / "data"
    with admin_api(
        f"sqlite:///{tmp_path / 'db.sqlite'}", workers=("projector", "ticker"), data_dir=str(data),
        simulator_review_calls=100_000,
        simulator_faults=False,  # a seeded fault (a lane skipping its pull request) is not this test's
        **changes,
    ) as (http, container):
        yield http, data, container


@pytest.fixture
def squad(tmp_path: Path) -> Iterator[tuple[TestClient, Path, object]]:
    with open_squad(tmp_path) as served:
        yield served


@pytest.fixture
def squad_private(tmp_path: Path) -> Iterator[tuple[TestClient, Path, object]]:
    """The squad of an operator who lets bindings bring repositories from internal hosts."""
    with open_squad(tmp_path, source_private_hosts=True) as served:
        yield served


def start_run(http: TestClient, slug: str, source: str) -> tuple[str, dict]:
    body = {
        "project_key": slug,
        "participants": PARTICIPANTS,
        "repository_bindings": [
            {"repository_key": "assembly", "vcs_repo_slug": f"{slug}/assembly", "repository_type": "assembly"},
            {"repository_key": "backend", "vcs_repo_slug": f"{slug}/api", "source_repository_url": source},
        ],
    }
    created = http.post(PROJECTS, json=body)
    assert created.status_code == 201, created.text
    run = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": slug})
    assert run.status_code == 201, run.text
    run_id = run.json()["run_id"]
    assert http.post(f"/v1/admin/studio/runs/{run_id}/execute").status_code == 202
    pull = eventually(lambda: next(
        (p for p in http.get(f"{PROJECTS}/{slug}/pulls").json()["items"] if p["run_id"] == run_id and p["agent_id"] == "backend"),
        None,
    ), timeout=60)
    return run_id, pull


def mailbox_messages(container: object, run_id: str, agent_id: str) -> list[str]:
    from projections.engine.runner import NotificationSource

    envs = NotificationSource(container.event_store).read(1, 1_000_000)  # type: ignore[attr-defined]
    return [e.event.message for e in envs if e.kind == "AgentSession.MessageDelivered" and e.run_id == run_id
            and e.agent_id == agent_id and e.event.channel == "mailbox"]


def test_a_lane_works_in_the_mirror_its_pull_request_is_reviewed_commented_and_pushed_back(
    squad: tuple[TestClient, Path, object], tmp_path: Path,
) -> None:
    http, data, container = squad
    origin = make_origin(tmp_path / "team-repo", {"README.md": "# Team\n", "src/app.py": "print('hi')\n"})
    base = git(origin, "rev-parse", "HEAD")
    run_id, pull = start_run(http, "acme", str(origin))
    number = pull["number"]
    assert (pull["state"], pull["repository_key"], pull["page_url"]) == ("open", "backend", f"/projects/acme/pulls/{number}")
    assert pull["session_url"] == f"/runs/{run_id}/agents/backend" and pull["role_key"]

    # The run fetched the mirror before it started, recorded on the project.
    fetched = http.get(f"{PROJECTS}/acme").json()["repository_bindings"][1]["metadata"]["last_fetch"]
    assert (fetched["run_id"], fetched["status"], fetched["head_sha"]) == (run_id, "fetched", base)

    # The lane committed on top of the team's history, in its own repository cloned from the
    # mirror; the mirror (out of the agents' reach) holds none of it until the gate publishes.
    lane = data / "repos" / "default" / "acme" / "backend.git"
    mirror = data / "vcs" / "default" / "acme" / "api.git"
    assert git(lane, "merge-base", "main", pull["head_sha"]) == base
    assert subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "-e", pull["head_sha"]]).returncode != 0

    detail = http.get(f"{PROJECTS}/acme/pulls/{number}", headers=CONTRIBUTOR)
    assert detail.status_code == 200, detail.text
    review = detail.json()
    assert (review["base_sha"], review["head_sha"]) == (base, pull["head_sha"])
    assert [c["sha"] for c in review["commits"]] == git(lane, "rev-list", f"{base}..{pull['head_sha']}").split()
    assert review["commits"][0]["author_email"].endswith("@agents.squadops.local")
    changed = {f["path"]: f for f in review["files"]}
    assert set(changed) == set(pull["changed_paths"]) and "squad/backend.md" in changed
    note = changed["squad/backend.md"]
    assert note["status"] == "added" and note["additions"] == len(note["hunks"][0]["lines"]) > 0
    first = note["hunks"][0]["lines"][0]
    assert (first["kind"], first["new_no"], first["text"]) == ("add", 1, "# backend")
    assert review["agents"][0] == {**review["agents"][0], "agent_id": "backend", "authored": True}
    assert review["may"] == {"comment": True, "publish": False}

    # A comment on a line reaches the authoring agent's mailbox, with the quoted hunk.
    comment = {"path": "squad/backend.md", "line": 1, "hunk": "+# backend", "body": "Name the endpoint here."}
    assert http.post(f"{PROJECTS}/acme/pulls/{number}/comments", json=comment, headers=VIEWER).status_code == 403
    sent = http.post(f"{PROJECTS}/acme/pulls/{number}/comments", json=comment, headers=CONTRIBUTOR)
    assert sent.status_code == 202, sent.text
    assert (sent.json()["verb"], sent.json()["run_id"]) == ("comment_agent", run_id)
    held = mailbox_messages(container, run_id, "backend")
    assert len(held) == 1 and "squad/backend.md line 1" in held[0] and "> +# backend" in held[0]
    assert "Name the endpoint here." in held[0] and "dev@example.com" in held[0]
    wrong = http.post(f"{PROJECTS}/acme/pulls/{number}/comments", json={**comment, "path": "nope.txt"}, headers=CONTRIBUTOR)
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"] == ["body", "path"]

    # The viewer reads the diff but may do nothing with it; strangers and other tenants see nothing.
    seen = http.get(f"{PROJECTS}/acme/pulls/{number}", headers=VIEWER)
    assert seen.status_code == 200 and seen.json()["may"] == {"comment": False, "publish": False}
    assert http.get(f"{PROJECTS}/acme/pulls/{number}", headers=STRANGER).status_code == 403
    assert http.get(f"{PROJECTS}/acme/pulls", headers=STRANGER).status_code == 403
    assert http.get(f"{PROJECTS}/acme/pulls/{number}", headers={**CONTRIBUTOR, "X-Squadops-Tenant-Id": "other"}).status_code == 404
    assert http.get(f"{PROJECTS}/acme/pulls/{number + 100_000}").status_code == 404

    # The project's page: bindings with their state, participants as the graph sees them, runs, open pulls.
    overview = http.get(f"{PROJECTS}/acme/overview", headers=VIEWER).json()
    backend = overview["project"]["repository_bindings"][1]["metadata"]
    assert (backend["vcs_repo_provision_status"], backend["last_fetch"]["run_id"]) == ("mirrored", run_id)
    roles = {p["subject_key"]: p["project_role"] for p in overview["participants"]}
    assert roles == {"dev@example.com": "contributor", "viewer@example.com": "viewer", "lead@example.com": "maintainer",
                     "operator@example.com": "owner"}
    assert [r["run_id"] for r in overview["runs"]] == [run_id] and number in [p["number"] for p in overview["pulls"]]
    assert (overview["may"], overview["caller_role"]) == ({"launch": False, "comment": False, "publish": False}, "viewer")
    assert http.get(f"{PROJECTS}/acme/overview", headers=CONTRIBUTOR).json()["may"] == {
        "launch": True, "comment": True, "publish": False}
    assert http.get(f"{PROJECTS}/acme/overview", headers=STRANGER).status_code == 403

    # Publishing needs a maintainer; the published branch goes back to the team's repository.
    assert http.post(f"{PROJECTS}/acme/pulls/{number}/publish", headers=CONTRIBUTOR).status_code == 403
    published = http.post(f"{PROJECTS}/acme/pulls/{number}/publish", headers=MAINTAINER)
    assert published.status_code == 200, published.text
    push = published.json()["publication"]["push"]
    assert (published.json()["status"], push["status"], push["origin"]) == ("published", "pushed", str(origin))
    assert git(origin, "rev-parse", f"refs/heads/{push['branch']}") == push["head_sha"]
    assert git(origin, "show", f"{push['branch']}:squad/backend.md").startswith("# backend")
    http.headers["X-Squadops-Min-Position"] = published.headers["X-Squadops-Position"]
    listed = http.get(f"{PROJECTS}/acme/pulls").json()["items"]
    mine = next(p for p in listed if p["number"] == number)
    assert mine["state"] == "published" and mine["publications"][0]["push"]["status"] == "pushed"
    assert number not in [p["number"] for p in http.get(f"{PROJECTS}/acme/overview").json()["pulls"]]
    # What a person sees names no address on the VCS host (which goes nowhere): the page
    # names the evidence by its path in the published branch, the office's gate lines too.
    evidence = mine["publications"][0]["evidence_path"]
    assert git(origin, "show", f"{push['branch']}:{evidence}").startswith("{")
    page = http.get(pull["page_url"], headers=VIEWER)
    assert page.status_code == 200 and f"<code>{evidence}</code>" in page.text
    feed = http.get("/control-plane/studio/observability-feed", params={"project_slug": "acme", "run_id": run_id}).json()
    lines = [x["message"] for x in feed["runtime_logs"] if x["source"] == "gate"]
    assert any(f"evidence in {evidence}" in line for line in lines), lines
    assert "vcs.squadops.local" not in page.text and not [line for line in lines if "vcs.squadops.local" in line]


def git_daemon(root: Path, writable: bool = False) -> Iterator[str]:
    """A git server (git://), read-only unless ``writable``: the origin cannot be pushed to."""
    from tests.infra import free_port, reachable

    port = free_port()
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={root}", "--listen=127.0.0.1", f"--port={port}",
         *(["--enable=receive-pack"] if writable else []), str(root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        eventually(lambda: reachable("127.0.0.1", port), timeout=10)
        yield f"git://127.0.0.1:{port}"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def test_an_origin_that_refuses_the_push_is_recorded_and_the_publication_stands(
    squad_private: tuple[TestClient, Path, object], tmp_path: Path,
) -> None:
    http, _, _ = squad_private
    served_root = tmp_path / "served"
    team = make_origin(tmp_path / "team", {"README.md": "# Team\n"})
    served_root.mkdir()
    subprocess.run(["git", "clone", "--quiet", "--bare", str(team), str(served_root / "team.git")], check=True)
    for base_url in git_daemon(served_root):
        source = f"{base_url}/team.git"
        _, pull = start_run(http, "readonly", source)
        published = http.post(f"{PROJECTS}/readonly/pulls/{pull['number']}/publish", headers=MAINTAINER)
        assert published.status_code == 200, published.text
        record = published.json()
        push = record["publication"]["push"]
        assert (record["status"], push["status"], push["origin"]) == ("published", "not_writable", source)
        assert push["error"].startswith("fatal:") and "\n" not in push["error"]
        refs = subprocess.run(["git", "--git-dir", str(served_root / "team.git"), "for-each-ref", "--format=%(refname)"],
                              capture_output=True, text=True, check=True).stdout.split()
        assert refs == ["refs/heads/main"]  # nothing else changed at the origin
        assert record["pr_url"] and record["promotion_decision"]


def test_each_run_fetches_the_origin_again(squad: tuple[TestClient, Path, object], tmp_path: Path) -> None:
    http, data, _ = squad
    origin = make_origin(tmp_path / "team-repo", {"README.md": "# Team\n"})
    run_id, _ = start_run(http, "acme", str(origin))
    (origin / "CHANGELOG.md").write_text("a change made by the team meanwhile\n")
    git(origin, "add", "CHANGELOG.md")
    git(origin, "commit", "--quiet", "-m", "Meanwhile")
    second = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
    http.headers["X-Squadops-Min-Position"] = second.headers["X-Squadops-Position"]
    fetched = http.get(f"{PROJECTS}/acme").json()["repository_bindings"][1]["metadata"]["last_fetch"]
    assert (fetched["run_id"], fetched["head_sha"]) == (second.json()["run_id"], git(origin, "rev-parse", "HEAD"))
    mirror = data / "vcs" / "default" / "acme" / "api.git"
    assert git(mirror, "rev-parse", "refs/heads/main") == git(origin, "rev-parse", "HEAD")
    assert run_id != second.json()["run_id"]

    # An origin gone away: the launch stands, the failed fetch is recorded with git's first line.
    shutil.rmtree(origin)
    third = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
    assert third.status_code == 201, third.text
    http.headers["X-Squadops-Min-Position"] = third.headers["X-Squadops-Position"]
    failed = http.get(f"{PROJECTS}/acme").json()["repository_bindings"][1]["metadata"]["last_fetch"]
    assert (failed["run_id"], failed["status"], failed["head_sha"]) == (third.json()["run_id"], "failed", "")
    assert failed["error"].startswith("fatal:") and "\n" not in failed["error"]
    assert git(mirror, "rev-parse", "refs/heads/main") == fetched["head_sha"]  # the mirror keeps what it had
