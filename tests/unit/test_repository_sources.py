"""Which sources a binding may bring (``domain.projects.sources``), and how a pull request's
patch is read into numbered lines (``workers.adapters.git_review.parse_patch``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from domain.projects.sources import redact, source_problem
from workers.adapters.git_review import parse_patch

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
