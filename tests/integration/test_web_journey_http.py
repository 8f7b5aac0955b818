"""The journey's pages over HTTP (issue 27): an agent's transcript read from its read model
with the run's read right, the launch form's JSON action checked like the launch endpoint,
and a pull request's diff rendered with every text escaped."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.web.diff_view import FOLD_OVER, KEEP, files_view
from api.web.pages import environment
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE, drive_runs
from workers.adapters.git_review import CONTEXT_LINES, commits, file_diffs
from workers.bootstrap import build
from workers.planes.simulator import FaultRates, SimulatorPlane

STRANGER = {"x-edge-claim-email": "stranger@example.com", "x-edge-claim-groups": ""}
MEMBERS = {
    **DEMO_LIKE,
    "participants": [
        {"subject_key": "keeper@example.com", "project_role": "maintainer"},
        {"subject_key": "look@example.com", "project_role": "viewer"},
    ],
}
MAINTAINER = {"x-edge-claim-email": "keeper@example.com", "x-edge-claim-groups": ""}
VIEWER = {"x-edge-claim-email": "look@example.com", "x-edge-claim-groups": ""}


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    db = tmp_path_factory.mktemp("journey") / "squadops.db"
    built = build(settings_for(f"sqlite:///{db}"))
    yield built
    built.close()


@pytest.fixture(scope="module")
def http(container: Any) -> Iterator[tuple[TestClient, str]]:
    with TestClient(create_app(container, workers=("projector",))) as client:
        client.headers.update(ADMIN)
        # No seeded faults: the pages are the subject, and a run whose planner drew a corrupt
        # checkout and whose curator drew a first-tool stall made no tool call at all.
        (run_id,) = drive_runs(container, runs=1, ticks=15, project=MEMBERS, faults=FaultRates.none())
        assert container.await_reads(container.event_store.max_position(), container.settings.min_position_wait_seconds)
        yield client, run_id


def test_an_agents_transcript_is_its_sessions_stream(http: tuple[TestClient, str]) -> None:
    client, run_id = http
    state = client.get(f"/v1/admin/studio/runs/{run_id}/session-state").json()["sessions"]
    agent = max(state, key=lambda s: s["tool_call_count"])
    page = client.get(f"/runs/{run_id}/agents/{agent['agent_id']}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    entries = re.findall(r'<li class="entry" data-kind="(\w+)"', page.text)
    assert entries.count("tool") == agent["tool_call_count"] + agent["failed_tool_call_count"] > 0
    assert f'<span data-metric="tool_calls">{agent["tool_call_count"] + agent["failed_tool_call_count"]}</span>' in page.text
    assert agent["session_id"] in page.text and 'id="entry-template"' in page.text
    # The read right is the feed's: a viewer reads it, a stranger gets the 403 page.
    assert client.get(f"/runs/{run_id}/agents/{agent['agent_id']}", headers=VIEWER).status_code == 200
    refused = client.get(f"/runs/{run_id}/agents/{agent['agent_id']}", headers=STRANGER)
    assert refused.status_code == 403 and "not_a_participant" in refused.text and "<h1" in refused.text
    missing = client.get(f"/runs/{run_id}/agents/nobody")
    assert missing.status_code == 404 and "agent_not_found" in missing.text


def test_each_tool_call_shows_its_result_under_it_and_a_long_one_folded(http: tuple[TestClient, str], container: Any) -> None:
    """The simulator's tools answer (a read: 40 numbered lines; anything else: a line or two),
    recorded with the call and read back from the transcripts read model."""
    client, run_id = http
    plane = SimulatorPlane(faults=FaultRates.none())  # as the run's first ticks

    def results() -> list[tuple[str, str]]:
        """(the <details> tag, its text) of every call's result, on each agent's page."""
        found_all: list[tuple[str, str]] = []
        for session in client.get(f"/v1/admin/studio/runs/{run_id}/session-state").json()["sessions"]:
            page = client.get(f"/runs/{run_id}/agents/{session['agent_id']}").text
            calls = [item for item in re.findall(r'<li class="entry" data-kind="tool".*?</li>', page, re.S)]
            assert len(calls) == session["tool_call_count"] + session["failed_tool_call_count"]
            for call in calls:
                found = re.search(r'(<details class="entry-result"[^>]*>)<summary>(.*?)</summary><pre>(.*?)</pre>', call, re.S)
                assert found, call  # every simulated call answered something
                found_all.append((found[1] + found[2], found[3]))
        return found_all

    # The run goes on until its agents have read a file and called another tool (tools are drawn).
    for _ in range(60):
        answered = results()
        long = [(tag, text) for tag, text in answered if text.count("\n") == 39]
        short = [(tag, text) for tag, text in answered if text.count("\n") < 8]
        if long and short:
            break
        container.studio.ticks.tick_runs(plane, tick=[("default", run_id)])
        assert container.await_reads(container.event_store.max_position(), container.settings.min_position_wait_seconds)
    assert long and short
    for tag, text in long:  # folded: closed until asked, its size on the summary
        assert " open" not in tag and f"result · {len(text.encode()):,} bytes" in tag and text.endswith("line 40")
    assert all(" open" in tag for tag, _ in short)


def test_the_launch_form_launches_like_the_endpoint_for_whom_the_graph_allows(http: tuple[TestClient, str]) -> None:
    client, _ = http
    board = client.get("/", headers=MAINTAINER)
    assert 'action="/runs"' in board.text and '<option value="acme">acme</option>' in board.text
    assert 'action="/runs"' not in client.get("/", headers=VIEWER).text  # nothing to launch on
    answer = client.post("/runs", json={"project_slug": "acme", "template_id": "delivery-core", "next_goal": "ship"}, headers=MAINTAINER)
    assert answer.status_code == 201, answer.text
    office = client.get(answer.json()["location"], headers=MAINTAINER)
    assert office.status_code == 200 and answer.json()["run_id"] in office.text
    run = client.get(f"/v1/admin/studio/runs/{answer.json()['run_id']}").json()
    assert run["status"] in ("scheduled", "running") and run["next_goal"] == "ship"
    # Refused as the API refuses: C3 bodies, nothing launched.
    before = client.get("/control-plane/studio/runs", params={"project_slug": "acme"}).json()["count"]
    viewer = client.post("/runs", json={"project_slug": "acme", "template_id": "delivery-core"}, headers=VIEWER)
    assert viewer.status_code == 403 and viewer.json()["code"] == "contribute_role_required"
    bad = client.post("/runs", json={"project_slug": "bad slug", "template_id": "delivery-core"}, headers=MAINTAINER)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "project_slug"]
    unknown = client.post("/runs", json={"project_slug": "acme", "template_id": "nope"}, headers=MAINTAINER)
    assert unknown.status_code == 404 and unknown.json()["code"] == "template_not_found"
    form = client.post("/runs", data={"project_slug": "acme", "template_id": "delivery-core"}, headers=MAINTAINER)
    assert form.status_code == 415  # a cross-site form cannot launch
    assert client.get("/control-plane/studio/runs", params={"project_slug": "acme"}).json()["count"] == before


def diff_of(path: str, texts: list[tuple[str, str]]) -> dict:
    lines, old, new = [], 0, 0
    for kind, text in texts:
        old += kind != "add"
        new += kind != "del"
        lines.append({"kind": kind, "old_no": None if kind == "add" else old, "new_no": None if kind == "del" else new, "text": text})
    hunk = {"header": "@@ -1 +1 @@", "old_start": 1, "old_lines": old, "new_start": 1, "new_lines": new, "lines": lines}
    return {"path": path, "old_path": "", "status": "modified", "binary": False, "additions": 1, "deletions": 1, "hunks": [hunk]}


def render_pull(files: list[dict], may: dict) -> str:
    pull = {
        "number": 3, "project_slug": "acme", "run_id": "run-1", "agent_id": "backend", "session_id": "ses-1",
        "role_key": "role_backend", "repository_key": "backend", "head_sha": "a" * 40, "changed_paths": [],
        "opened_at": "2026-11-26T13:00:00Z", "state": "open", "page_url": "/projects/acme/pulls/3",
        "session_url": "/runs/run-1/agents/backend", "publications": [],
    }
    commit = {"sha": "a" * 40, "short_sha": "aaaaaaa", "author_name": "<b>bot</b>", "author_email": "", "authored_at": "", "subject": "<script>alert(1)</script>", "body": ""}
    detail = {"pull": pull, "base_sha": "b" * 40, "head_sha": "a" * 40, "commits": [commit], "files": files, "evidence": [], "agents": [], "may": may,
              "comment_closed": ""}
    context = {"page": "pull", "title": "PR", "who": "", "script": False, "config": {}, "initial": "", "project_slug": "acme"}
    return environment().get_template("pull.html").render(**context, pull=pull, detail=detail, files=files_view(files), may=may)


def test_a_diff_with_html_in_it_is_escaped_and_coloured() -> None:
    evil = diff_of("site/<img src=x onerror=alert(1)>.html", [
        ("context", "<html>"),
        ("del", '<script>alert("old")</script>'),
        ("add", "<p onclick=\"steal()\">hi & bye</p>"),
        ("context", "</html>"),
    ])
    html = render_pull([evil], {"comment": True, "publish": True})
    for raw in ("<script>alert", "<img src=x", "<p onclick", "<b>bot</b>"):
        assert raw not in html
    text = re.sub(r"<[^>]+>", "", html)  # what the browser shows, still escaped
    assert "&lt;p onclick=&#34;steal()&#34;&gt;hi &amp; bye&lt;/p&gt;" in text
    assert "&lt;script&gt;alert(&#34;old&#34;)&lt;/script&gt;" in text
    assert re.search(r'<span class="n[a-z]*">', html), "HTML is coloured by its lexer"
    assert 'id="publish"' in html and 'id="comment-form"' in html


def test_a_diff_read_from_a_repository_shows_html_escaped_code_coloured_and_the_code_around_changes_folded(tmp_path: Path) -> None:
    """The page over what git itself answers: a change in the middle of a long Python file and
    one in an HTML page, committed with markup for a message."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", *args],
                              cwd=tmp_path, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    git("init", "--quiet", "--initial-branch=main")
    code = [f"def f_{n}():\n    return {n}\n" for n in range(30)]
    (tmp_path / "app.py").write_text("".join(code))
    (tmp_path / "page.html").write_text("<html>\n<body>\n<p>old</p>\n</body>\n</html>\n")
    git("add", "--all")
    git("commit", "--quiet", "-m", "base")
    base = git("rev-parse", "HEAD")
    code[15] = "def f_15():\n    return 'changed'\n"
    (tmp_path / "app.py").write_text("".join(code))
    (tmp_path / "page.html").write_text('<html>\n<body>\n<script>alert("x")</script>\n</body>\n</html>\n')
    git("commit", "--quiet", "--all", "-m", "<script>alert(1)</script>")
    head = git("rev-parse", "HEAD")

    repo = tmp_path / ".git"
    files = file_diffs(repo, base, head)
    assert [f["path"] for f in files] == ["app.py", "page.html"]
    (python,) = files_view(files[:1])[0].hunks
    # Unchanged code around the change: KEEP lines next to it in view, the rest folded, not missing.
    assert [block.folded for block in python.blocks] == [True, False, True]
    folded_before = python.blocks[0].lines
    changed = 2 * 15 + 2  # the line of f_15's return
    assert [x.new_no for x in folded_before] == list(range(changed - CONTEXT_LINES, changed - KEEP))
    assert all(x.kind == "context" for x in folded_before)
    shown = python.blocks[1].lines
    assert [x.kind for x in shown].count("context") == 2 * KEEP and "'changed'" in "".join(x.text for x in shown)

    html = render_pull(files, {"comment": True, "publish": True}) + render_pull_commits(commits(repo, base, head))
    assert '<details class="fold"><summary>' in html and "unchanged lines</summary>" in html
    assert re.search(r'<span class="k">def</span>', html), "Python is coloured by its lexer"
    for raw in ('<script>alert("x")', "<script>alert(1)"):
        assert raw not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in re.sub(r"<[^>]+>", "", html)
    assert "<strong>&lt;script&gt;alert(1)&lt;/script&gt;</strong>" in html


def render_pull_commits(found: list[dict]) -> str:
    """The page's commit list for ``found`` (its other parts as render_pull draws them)."""
    assert found
    pull = {"number": 3, "run_id": "run-1", "repository_key": "backend", "opened_at": "", "state": "open", "publications": []}
    detail = {"pull": pull, "base_sha": "b" * 40, "head_sha": "a" * 40, "commits": found, "files": [], "evidence": [], "agents": [],
              "may": {"comment": False, "publish": False}, "comment_closed": ""}
    context = {"page": "pull", "title": "PR", "who": "", "script": False, "config": {}, "initial": "", "project_slug": "acme"}
    return environment().get_template("pull.html").render(**context, pull=pull, detail=detail, files=[], may=detail["may"])


def test_a_viewer_gets_the_diff_without_controls() -> None:
    html = render_pull([diff_of("a.py", [("add", "x = 1")])], {"comment": False, "publish": False})
    assert 'class="ln add"' in html and "x" in html
    assert 'id="publish"' not in html and 'id="comment-form"' not in html


def test_long_unchanged_context_folds_keeping_lines_either_side() -> None:
    body = [("add", "start = 1")] + [("context", f"line_{n} = {n}") for n in range(40)] + [("del", "end = 0")]
    (view,) = files_view([diff_of("a.py", body)])
    (hunk,) = view.hunks
    shown, folded, tail = hunk.blocks
    assert not shown.folded and folded.folded and not tail.folded
    assert len(shown.lines) == 1 + KEEP and len(folded.lines) == 40 - 2 * KEEP and len(tail.lines) == KEEP + 1
    short = files_view([diff_of("a.py", [("context", "a")] * FOLD_OVER + [("add", "b")])])[0].hunks[0]
    assert [b.folded for b in short.blocks] == [False]


def test_the_project_factory_page_and_the_portal_home(http: tuple[TestClient, str]) -> None:
    client, run_id = http
    factory = client.get("/portal/projects/new", headers=VIEWER)
    assert factory.status_code == 200
    assert 'action="/v1/project-factory/projects"' in factory.text
    for name in ("project_key", "repository_bindings.0.source_repository_url", "repository_bindings.0.vcs_repo_slug", "participants.0.subject_key"):
        assert f'name="{name}"' in factory.text
    assert '<option value="delivery-core">' in factory.text
    # The portal home: the caller's projects with their role, first; blocked runs they may read.
    home = client.get("/portal", headers=VIEWER).text
    assert home.index("Needs you") < home.index("Your projects") < home.index("Your workspaces") < home.index("Everything else")
    assert re.search(r'data-project="acme"><a class="item-title" href="/projects/acme">Acme shop</a>\s*<span class="muted">acme · viewer', home)
    assert 'href="/portal/projects/new"' in home
    stranger = client.get("/portal", headers=STRANGER).text
    assert 'data-project="acme"' not in stranger and "You take part in no project yet." in stranger


def test_a_transcript_folds_long_texts_marks_failed_calls_and_links_handoffs() -> None:
    from api.web.controller import BLANK_ENTRY
    from api.web.transcript_view import FOLD_CHARS, first_line, folded, result_label

    def entry(kind: str, text: str, **fields: object) -> dict:
        found = {**BLANK_ENTRY, "kind": kind, "text": text, "position": 7, "at": "2026-11-26T13:00:00Z", **fields}
        return {**found, "folded": folded(text), "first_line": first_line(text)}

    long = "line one of a long result\n" + "x" * FOLD_CHARS
    entries = [
        entry("tool", long, tool_name="Bash", input="shell"),
        entry("tool", "exit 1: <b>denied</b>", tool_name="Write", failed=True),
        entry("handoff", "the API is ready", target_agent_id="frontend"),
        entry("message", "short"),
        entry("tool", "read a page", tool_name="Read", result="<script>alert(1)</script>\n" * 20,
              result_folded=True, result_label=result_label(20_000, True)),
    ]
    head = {"session_id": "ses-1", "messages": 1, "tool_calls": 2, "failed_calls": 1, "handoffs": 1, "model": "m", "result": {}}
    context = {"page": "transcript", "title": "t", "who": "", "script": False, "config": {}, "initial": ""}
    html = environment().get_template("transcript.html").render(
        **context, run_id="run-1", agent_id="backend", head=head, entries=entries, blank=BLANK_ENTRY, reported=["$0.10"]
    )
    items = re.findall(r'<li class="entry".*?</li>', html, re.S)[:4]
    assert "<details class=\"entry-text\"><summary>line one of a long result</summary>" in items[0]
    assert "data-failed" in items[1] and "&lt;b&gt;denied&lt;/b&gt;" in items[1] and "data-failed" not in items[0]
    assert 'href="/runs/run-1/agents/frontend"' in items[2] and "→ frontend" in items[2]
    assert "<details" not in items[3] and "entry-tool" not in items[3]  # nothing it does not have
    assert "entry-result" not in items[0]  # a call that answered nothing shows no result
    cut = re.findall(r'<li class="entry".*?</li>', html, re.S)[4]
    assert '<details class="entry-result"><summary>result · 20,000 bytes, first 4,096 shown</summary>' in cut
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in cut and "<script>alert" not in cut
    assert '<span data-metric="failed_calls">1</span>' in html and "· $0.10" in html
