"""A team brings the repository it already has: the project factory mirrors an existing local
repository as the binding's repository (a bare clone in the tenant's storage), refuses every
source git must not read (422 with git's own first line, nothing created), and fetches the
mirror again before each run, recording it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from workers.bootstrap import build

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
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(data)))
    with TestClient(create_app(container, workers=("projector",))) as http:
        http.headers.update(ADMIN)
        yield http, data
    container.close()


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
    unreachable = refused(http, data, "unreachable", "http://127.0.0.1:9/team/repo.git")
    assert unreachable["msg"].startswith("fatal: ") and "127.0.0.1" in unreachable["msg"]
    secret = refused(http, data, "secret", "http://bot:s3cret@127.0.0.1:9/team/repo.git")
    assert "s3cret" not in str(secret["input"]) and "s3cret" not in secret["msg"]


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


def test_openapi_documents_the_source(served: tuple[TestClient, Path]) -> None:
    http, _ = served
    schema = http.get("/openapi.json").json()
    binding = schema["components"]["schemas"]["RepositoryBindingIn"]["properties"]["source_repository_url"]
    assert "mirror" in binding["description"] and binding["maxLength"] == 2048
