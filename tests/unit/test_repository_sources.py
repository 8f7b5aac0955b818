"""Which sources a binding may bring (``domain.projects.sources``: the syntax, the operator's
local roots, public hosts only), the settings that say so, and how a pull request's patch is
read into numbered lines (``workers.adapters.git_review.parse_patch``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from domain.projects.sources import SourceError, SourcePolicy, ipv4_literal, redact, source_problem
from workers.adapters import git_sources
from workers.adapters.git_review import parse_patch
from workers.adapters.git_sources import source_options
from workers.adapters.local_git import LocalGitVcs, git_environment
from workers.settings import SettingsError, load_settings

ROOT = Path("/srv/squadops-data")


@pytest.mark.parametrize("url", [
    "/srv/git/team.git", "file:///srv/git/team.git", "https://git.example.com/team/repo.git",
    "http://git.example.com:8080/team/repo", "git://127.0.0.1:9418/team.git", "HTTPS://GIT.EXAMPLE.COM/x",
])
def test_paths_and_the_allowed_transports_pass(url: str) -> None:
    assert source_problem(url, [ROOT]) is None


@pytest.mark.parametrize(("url", "why"), [
    ("ext::sh -c touch", "whitespace"), ("ext::touch", "transport::address"), ("fd::3", "transport::address"),
    ("--upload-pack=x", "'-'"), ("-oProxyCommand=x", "'-'"), ("ssh://h/x", "'ssh' protocol"),
    ("git@github.com:t/r.git", "absolute path"), ("relative/repo", "absolute path"), ("https://", "host"),
    ("https://-oProxy/x", "host"), ("file://other/srv/x", "local path"), ("/srv/../etc", "'..'"),
    ("/srv/a\x00b", "control"), ("", "1 to"), ("/" + "a" * 3000, "1 to"),
    ("/srv/squadops-data/vcs/other/x/y.git", "own data"), ("file:///srv/squadops-data", "own data"),
    # git decodes a file URL's escapes: the path checked would not be the path read
    ("file:///srv/squadops-dat%61/vcs/other/x.git", "percent"), ("file:///srv/a/%2e%2e/squadops-data", "percent"),
    # and reads '?' and '#' as part of the path, where a URL parser sees a query or fragment
    ("file:///srv/git/x#/../../squadops-data/vcs", "'#'"), ("file:///srv/git/x?/../../squadops-data", "'?'"),
    ("http://[::1/x", "no host name"),
])
def test_everything_else_is_refused_with_its_reason(url: str, why: str) -> None:
    problem = source_problem(url, [ROOT])
    assert problem is not None and why in problem


@given(st.text(max_size=60))
@example("/\x80")  # a C1 control character (once found by this test)
@example("/srv/a\u2028b")  # a line separator
def test_a_refused_or_passing_source_never_starts_with_an_option(url: str) -> None:
    if source_problem(url, [ROOT]) is None:
        assert not url.startswith("-") and "::" not in url.split("/", 1)[0] and url.isprintable() and " " not in url


# -- the operator's local roots ------------------------------------------------------------


def test_a_local_source_must_lie_under_a_local_root_after_symlinks(tmp_path: Path) -> None:
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    (allowed / "team").mkdir(parents=True)
    (elsewhere / "secret").mkdir(parents=True)
    (allowed / "escape").symlink_to(elsewhere / "secret")
    (elsewhere / "inward").symlink_to(allowed / "team")
    roots = [allowed]
    assert source_problem(str(allowed / "team"), [ROOT], roots) is None
    assert source_problem(f"file://{allowed / 'team'}", [ROOT], roots) is None
    assert source_problem(str(elsewhere / "inward"), [ROOT], roots) is None  # it is the allowed one
    for url in (str(elsewhere / "secret"), f"file://{elsewhere / 'secret'}", str(allowed / "escape"),
                str(tmp_path / "allowed-not"), "/etc"):
        problem = source_problem(url, [ROOT], roots)
        assert problem == "source_repository_url must lie under a directory SQUADOPS_SOURCE_LOCAL_ROOTS names", url
    # The service's own data stays refused even under a local root.
    assert "own data" in (source_problem(str(allowed / "team"), [allowed], roots) or "")
    # No local root at all (production's default): no local source.
    assert "names no directory" in (source_problem(str(allowed / "team"), [ROOT], []) or "")
    # None (the embedded default's): any local path outside the service's data, as before.
    assert source_problem(str(elsewhere / "secret"), [ROOT], None) is None
    # Network sources are not local ones.
    assert source_problem("https://git.example.com/x", [ROOT], []) is None


def test_what_git_reads_of_a_local_source_is_judged_without_being_misread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    allowed, data = tmp_path / "allowed", tmp_path / "data"
    policy = SourcePolicy(resolve=resolve, forbidden_roots=(data,), local_roots=(allowed,))
    theirs, repo = data / "vcs" / "other" / "x.git", allowed / "team.git"
    for bare in (theirs, repo):
        subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
    plain = ["-c", "http.followRedirects=false"]
    assert source_options(policy, str(repo)) == plain
    alternates = repo / "objects" / "info" / "alternates"
    # git unquotes a quoted entry ('\057' is '/'): refused rather than read otherwise than git does
    alternates.write_text('"' + str(theirs / "objects").replace("/", "\\057") + '"\n')
    with pytest.raises(SourceError, match="alternates must not hold quoted paths"):
        source_options(policy, str(repo))
    # git reads no further than a NUL: what follows one is not checked, so the file is refused
    alternates.write_bytes(b"../../elsewhere\0" + str(theirs / "objects").encode())
    with pytest.raises(SourceError, match="alternates must be a small text file"):
        source_options(policy, str(repo))
    # a FIFO where git expects a file is not waited on
    alternates.unlink()
    os.mkfifo(alternates)
    assert source_options(policy, f"file://{repo}") == plain
    # a link to a directory is followed, and what lies inside it judged in turn
    alternates.unlink()
    (allowed / "hop").mkdir()
    (allowed / "hop" / "pack").symlink_to(theirs / "objects" / "pack")
    (repo / "objects" / "hop").symlink_to(allowed / "hop")
    with pytest.raises(SourceError, match="symlinks must not lead into the service's own data"):
        source_options(policy, str(repo))
    (repo / "objects" / "hop").unlink()
    # a bundle is no .git file; a repository too large to walk is refused, not half-checked
    team = allowed / "team"
    subprocess.run(["git", "clone", "--quiet", str(repo), str(team)], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(team), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet",
                    "--allow-empty", "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(team), "bundle", "create", str(allowed / "team.bundle"), "--all"],
                   check=True, capture_output=True)
    assert source_options(policy, str(allowed / "team.bundle")) == plain
    monkeypatch.setattr(git_sources, "MAX_ENTRIES", 5)
    with pytest.raises(SourceError, match="too many files to check"):
        source_options(policy, str(repo))


def test_the_local_roots_setting() -> None:
    assert load_settings({}).source_roots is None
    assert load_settings({"SQUADOPS_ENV": "production"}).source_roots == ()
    assert load_settings({"SQUADOPS_SOURCE_LOCAL_ROOTS": "/srv/git:/home/team/repos:"}).source_roots == (
        Path("/srv/git"), Path("/home/team/repos"))
    assert load_settings({"SQUADOPS_ENV": "production", "SQUADOPS_SOURCE_LOCAL_ROOTS": "/srv/git"}).source_roots == (
        Path("/srv/git"),)
    with pytest.raises(SettingsError, match="SQUADOPS_SOURCE_LOCAL_ROOTS holds absolute"):
        load_settings({"SQUADOPS_SOURCE_LOCAL_ROOTS": "/srv/git:repos"})
    assert load_settings({}).source_private_hosts is False
    assert load_settings({"SQUADOPS_SOURCE_PRIVATE_HOSTS": "1"}).source_private_hosts is True


# -- network sources: public hosts only ------------------------------------------------------

NAMES = {"git.example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
         "localhost": ["127.0.0.1", "::1"], "intranet.example.com": ["10.1.2.3"],
         "metadata.example.com": ["169.254.169.254"], "split.example.com": ["93.184.216.34", "192.168.0.7"],
         "v6local.example.com": ["fd12::1"], "mapped.example.com": ["::ffff:127.0.0.1"]}
asked: list[tuple[str, int]] = []


def resolve(host: str, port: int) -> list[str]:
    asked.append((host, port))
    return NAMES.get(host, [])


PUBLIC = SourcePolicy(resolve=resolve, forbidden_roots=(ROOT,))
PRIVATE_ALLOWED = SourcePolicy(resolve=resolve, forbidden_roots=(ROOT,), private_hosts=True)
INTERNAL = "SQUADOPS_SOURCE_PRIVATE_HOSTS=1"


@pytest.mark.parametrize("host", [
    "127.0.0.1", "127.1", "127.0.1", "2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1", "017700000001",
    "0", "0.0.0.0", "10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1", "169.254.169.254", "169.254.0.1",
    "224.0.0.1", "255.255.255.255", "[::1]", "[::]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::7f00:1]",
    "[64:ff9b::a9fe:a9fe]", "[2002:7f00:1::]", "[fe80::1]", "[fe80::1%25eth0]", "[fd00::1]", "[fec0::1]",
    "localhost", "LOCALHOST", "intranet.example.com", "metadata.example.com", "split.example.com",
    "v6local.example.com", "mapped.example.com", "no-such-host.example.com",
])
@pytest.mark.parametrize("scheme", ["http", "https", "git"])
def test_internal_hosts_are_refused_in_every_spelling(scheme: str, host: str) -> None:
    for url in (f"{scheme}://{host}/team/repo.git", f"{scheme}://user:token@{host}:8080/team/repo.git"):
        with pytest.raises(SourceError, match=INTERNAL):
            PUBLIC.admit(url)


@pytest.mark.parametrize("url", [
    "http://%31%32%37.0.0.1/x", "http://git.example.com%2f/x", "http://a@b@127.0.0.1/x",
    "http://git.example.com\\@127.0.0.1/x", "http://git.example.com:99999/x", "http://git.example.com:x/x",
    "http://[::1:zz]/x", "http://gït.example.com/x", "http://git.example.com./x",
])
def test_hosts_parsers_could_read_two_ways_are_refused(url: str) -> None:
    for policy in (PUBLIC, PRIVATE_ALLOWED):
        with pytest.raises(SourceError):
            policy.admit(url)


def test_a_public_host_is_admitted_with_the_addresses_it_was_checked_at() -> None:
    asked.clear()
    admitted = PUBLIC.admit("https://bot:token@git.example.com/team/repo.git")
    assert (admitted.host, admitted.port) == ("git.example.com", 443) and asked == [("git.example.com", 443)]
    assert admitted.addresses == ("2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34")
    assert PUBLIC.admit("http://GIT.example.com:8080/x").port == 8080
    assert PUBLIC.admit("git://git.example.com/x").addresses == ("2606:2800:220:1:248:1893:25c8:1946", "93.184.216.34")
    assert PUBLIC.admit("https://93.184.216.34/x").addresses == ()  # a literal is not resolved
    assert PUBLIC.admit("https://[2606:4700::1111]/x").addresses == ()
    # git gets them pinned, and never follows a redirect.
    assert source_options(PUBLIC, "https://git.example.com/team/repo.git") == [
        "-c", "http.followRedirects=false",
        "-c", "http.curloptResolve=git.example.com:443:[2606:2800:220:1:248:1893:25c8:1946],93.184.216.34",
    ]
    assert source_options(PUBLIC, "/srv/git/team.git") == ["-c", "http.followRedirects=false"]
    # git:// has no such option: git is handed the URL with the host replaced by one checked
    # address (IPv4 first), the port and the rest kept, whatever the URL spells after it.
    assert source_options(PUBLIC, "git://git.example.com:9419/team/repo.git?x=y") == [
        "-c", "http.followRedirects=false",
        "-c", "url.git://93.184.216.34:9419.insteadOf=git://git.example.com:9419",
    ]
    assert source_options(PRIVATE_ALLOWED, "git://v6local.example.com/x") == [
        "-c", "http.followRedirects=false", "-c", "url.git://[fd12::1].insteadOf=git://v6local.example.com"]
    assert source_options(PUBLIC, "git://93.184.216.34/x") == ["-c", "http.followRedirects=false"]  # a literal


def test_the_operator_may_allow_internal_hosts() -> None:
    for url in ("http://127.0.0.1:9/x", "git://localhost/x", "http://[::1]/x", "https://intranet.example.com/x",
                "http://169.254.169.254/x", "http://2130706433/x"):
        assert PRIVATE_ALLOWED.problem(url) is None, url
    assert PRIVATE_ALLOWED.admit("https://intranet.example.com/x").addresses == ("10.1.2.3",)  # still pinned
    assert PRIVATE_ALLOWED.problem("https://no-such-host.example.com/x") == "source_repository_url's host does not resolve"
    # The rest of the policy holds all the same.
    assert "own data" in (PRIVATE_ALLOWED.problem(f"file://{ROOT}/vcs") or "")
    assert "'ssh' protocol" in (PRIVATE_ALLOWED.problem("ssh://127.0.0.1/x") or "")


def test_git_connects_to_the_address_the_check_resolved_not_a_rebound_one(tmp_path: Path) -> None:
    """A name that answers a public address at the check and a private one afterwards: git is
    told the first, and the name is resolved once per operation, by the policy (the clone,
    fetch and push against a git daemon: the integration test)."""
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])
    policy = SourcePolicy(resolve=lambda host, port: next(answers), forbidden_roots=(ROOT,))
    commands: list[tuple[str, ...]] = []

    class Recording(LocalGitVcs):
        def run_git(self, *args: str, **kwargs: object):  # type: ignore[no-untyped-def, override]
            commands.append(args)
            return super().run_git("--version")

    vcs = Recording(tmp_path / "vcs", "https://vcs.example", source_policy=policy)
    vcs.probe("git://rebinding.example.com/team.git", "main")
    assert commands == [("-c", "http.followRedirects=false",
                         "-c", "url.git://93.184.216.34.insteadOf=git://rebinding.example.com",
                         "ls-remote", "--heads", "--", "git://rebinding.example.com/team.git", "refs/heads/main")]
    with pytest.raises(SourceError, match=INTERNAL):  # the next operation resolves again, and is refused
        vcs.probe("git://rebinding.example.com/team.git", "main")
    assert len(commands) == 1


def test_git_runs_with_no_repository_named_by_the_environment() -> None:
    environ = {"PATH": "/usr/bin", "HOME": "/home/squadops", "GIT_SSL_CAINFO": "/etc/ca.pem",
               "GIT_ALTERNATE_OBJECT_DIRECTORIES": "/srv/squadops-data/vcs/other/x.git/objects",
               "GIT_DIR": "/srv/x.git", "GIT_COMMON_DIR": "/srv/x.git", "GIT_OBJECT_DIRECTORY": "/srv/x.git/objects",
               "GIT_WORK_TREE": "/srv/x", "GIT_INDEX_FILE": "/tmp/i", "GIT_NAMESPACE": "other",
               "GIT_CONFIG_PARAMETERS": "'core.hookspath'='/tmp/h'", "GIT_CONFIG_COUNT": "1",
               "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "/tmp/h"}
    assert git_environment(environ) == {"PATH": "/usr/bin", "HOME": "/home/squadops", "GIT_SSL_CAINFO": "/etc/ca.pem"}


def test_ipv4_literals_read_as_inet_aton_reads_them() -> None:
    assert {str(ipv4_literal(h)) for h in ("127.0.0.1", "127.1", "2130706433", "0x7F.1", "0177.0.0.01")} == {"127.0.0.1"}
    assert str(ipv4_literal("10.0x10203")) == "10.1.2.3"
    for name in ("git.example.com", "1.2.3.4.5", "256.0.0.1", "4294967296", "08.0.0.1", "1..2", "0x1g"):
        assert ipv4_literal(name) is None, name


def test_redact_drops_user_information_only() -> None:
    assert redact("https://u:p@h.example/x.git") == "https://h.example/x.git"
    assert redact("https://h.example/x.git") == "https://h.example/x.git"
    assert redact("/srv/u:p@x") == "/srv/u:p@x"


def test_a_patch_becomes_hunks_of_numbered_lines() -> None:
    patch = [
        "index 1..2 100644", "--- a/app.py", "+++ b/app.py",
        "@@ -1,3 +1,4 @@ def main():", " keep", "-old", "+new", "+<script>alert(1)</script>", " tail",
        "\\ No newline at end of file",
        "@@ -10 +11 @@", "-x", "+y", "",
    ]
    hunks, binary = parse_patch(patch)
    assert not binary and [h["header"] for h in hunks] == ["@@ -1,3 +1,4 @@ def main():", "@@ -10 +11 @@"]
    assert [(x["kind"], x["old_no"], x["new_no"], x["text"]) for x in hunks[0]["lines"]] == [
        ("context", 1, 1, "keep"), ("del", 2, None, "old"), ("add", None, 2, "new"),
        ("add", None, 3, "<script>alert(1)</script>"), ("context", 3, 4, "tail"),
    ]
    assert [(x["kind"], x["old_no"], x["new_no"]) for x in hunks[1]["lines"]] == [("del", 10, None), ("add", None, 11)]
    assert (hunks[1]["old_lines"], hunks[1]["new_lines"]) == (1, 1)


def test_a_binary_file_has_no_hunks() -> None:
    assert parse_patch(["index 1..2", "Binary files a/x.png and b/x.png differ"]) == ([], True)
