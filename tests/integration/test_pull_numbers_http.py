"""Pull requests through the real HTTP app (issue 27's remaining defects): two runs of one
project open pull requests numbered 1, 2, 3… in the project, every page reachable; a line
comment reaches an agent that had completed (it works again), an ended run or a stopped
agent is a 409 that stores nothing and the page says why; a line outside the diff is a 422."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from projections.portal.notifications import OUTBOX
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE
from tests.integration.control_support import run_verb, session_verb, sessions
from tests.integration.test_bring_repository_http import mailbox_messages
from workers.bootstrap import build

PROJECTS = "/v1/project-factory/projects"
CONTRIBUTOR = {"x-edge-claim-email": "dev@example.com", "x-edge-claim-groups": ""}
PROJECT = {**DEMO_LIKE, "participants": [{"subject_key": "dev@example.com", "project_role": "contributor"}]}
TENANT = "default"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Any]]:
    container = build(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}", data_dir=str(tmp_path / "data"), simulator_faults=False))
    with TestClient(create_app(container, workers=("projector",))) as http:
        http.headers.update(ADMIN)
        assert http.post(PROJECTS, json=PROJECT).status_code == 201
        yield http, container
    container.close()


def caught_up(http: TestClient, container: Any) -> None:
    """Reads after every write so far (the read-your-writes header every client may send)."""
    http.headers["X-Squadops-Min-Position"] = str(container.event_store.max_position())


def launch(http: TestClient, container: Any) -> str:
    run = http.post("/v1/admin/studio/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
    assert run.status_code == 201, run.text
    run_id = run.json()["run_id"]
    assert http.post(f"/v1/admin/studio/runs/{run_id}/execute").status_code == 202
    container.studio.ticks.tick_runs(container.plane, start=[(TENANT, run_id)])
    return run_id


def tick_until(http: TestClient, container: Any, run_ids: list[str], done: Any, ticks: int = 120) -> Any:
    for _ in range(ticks):
        caught_up(http, container)
        found = done()
        if found:
            return found
        container.studio.ticks.tick_runs(container.plane, tick=[(TENANT, r) for r in run_ids])
    raise AssertionError(f"not within {ticks} ticks")


def pulls(http: TestClient) -> list[dict]:
    answer = http.get(f"{PROJECTS}/acme/pulls")
    assert answer.status_code == 200, answer.text
    return answer.json()["items"]


def backend_pull(http: TestClient, run_id: str) -> dict | None:
    return next((p for p in pulls(http) if p["run_id"] == run_id and p["agent_id"] == "backend"), None)


def test_two_runs_of_one_project_number_their_pull_requests_in_the_project(served: tuple[TestClient, Any]) -> None:
    http, container = served
    runs = [launch(http, container), launch(http, container)]
    tick_until(http, container, runs, lambda: all(backend_pull(http, r) for r in runs))
    listed = pulls(http)
    numbers = [p["number"] for p in listed]
    assert sorted(numbers) == list(range(1, len(numbers) + 1)) and {p["run_id"] for p in listed} == set(runs)
    # The plane drew its own numbers (the host's reference); the pages go by the project's.
    assert all(100 <= p["plane_number"] <= 999 for p in listed)
    for pull in listed:
        assert pull["page_url"] == f"/projects/acme/pulls/{pull['number']}" and pull["title"]
        page = http.get(pull["page_url"])
        assert page.status_code == 200 and pull["run_id"] in page.text and f"#{pull['number']}</span>" in page.text
        detail = http.get(f"{PROJECTS}/acme/pulls/{pull['number']}")
        assert detail.status_code == 200 and (detail.json()["pull"]["run_id"], detail.json()["pull"]["agent_id"]) == (
            pull["run_id"], pull["agent_id"])
    # The office's badge and the notifications name the project's number and link its page.
    for run_id in runs:
        feed = http.get("/control-plane/studio/observability-feed", params={"project_slug": "acme", "run_id": run_id})
        delivery = feed.json()["delivery"]
        mine = [p["number"] for p in listed if p["run_id"] == run_id]
        assert delivery["pr_number"] in mine
    notes = [json.loads(bytes(r.body)) for r in container.store.dump(OUTBOX) if r.partition == "outbox"]
    delivered = [n for n in notes if n["kind"] == "delivery"]
    assert {n["url"] for n in delivered} == {p["page_url"] for p in listed if p["repository_key"] != "assembly"}
    for note in delivered:
        number = int(note["url"].rsplit("/", 1)[1])
        pull = next(p for p in listed if p["number"] == number)
        assert "vcs.squadops.local" not in note["body"] and note["body"] == f"#{number} {pull['title']}"
        assert note["title"] == f"Pull request #{number} opened in acme"


def status(http: TestClient, run_id: str, agent_id: str = "backend") -> str:
    return sessions(http, run_id).get(agent_id, {}).get("live_status", "")


def comment(http: TestClient, number: int, **changes: Any) -> Any:
    body = {"path": "squad/backend.md", "line": 1, "hunk": "+# backend", "body": "Name the endpoint here.", **changes}
    return http.post(f"{PROJECTS}/acme/pulls/{number}/comments", json=body, headers=CONTRIBUTOR)


def refused_comment(http: TestClient, container: Any, pull: dict[str, Any], code: str, why: str) -> Any:
    """A comment refused with 409 ``code`` saying ``why``, nothing stored; the PR page after it
    (which no longer offers the form)."""
    before = container.event_store.max_position()
    refused = comment(http, pull["number"])
    assert refused.status_code == 409 and refused.json()["code"] == code, refused.text
    assert why in refused.json()["detail"] and container.event_store.max_position() == before
    caught_up(http, container)
    page = http.get(pull["page_url"], headers=CONTRIBUTOR)
    assert 'id="comment-form"' not in page.text
    return page


def test_a_comment_reaches_an_agent_that_had_completed_and_it_works_again(served: tuple[TestClient, Any]) -> None:
    http, container = served
    run_id = launch(http, container)
    tick_until(http, container, [run_id], lambda: status(http, run_id) == "session_completed")
    assert http.get(f"/v1/admin/studio/runs/{run_id}").json()["status"] == "running"
    pull = backend_pull(http, run_id)
    assert pull is not None
    page = http.get(pull["page_url"], headers=CONTRIBUTOR)
    assert 'id="comment-form"' in page.text and "comment-closed" not in page.text

    sent = comment(http, pull["number"])
    assert sent.status_code == 202, sent.text
    assert (sent.json()["status"], sent.json()["verb"]) == ("reopened", "comment_agent")
    held = mailbox_messages(container, run_id, "backend")
    assert len(held) == 1 and f"pull request #{pull['number']}, squad/backend.md line 1" in held[0]
    caught_up(http, container)
    assert sessions(http, run_id)["backend"]["live_status"] == "ready"
    # The plane starts its process again (briefed with the mailbox) and the agent works on.
    tick_until(http, container, [run_id], lambda: status(http, run_id) in ("working", "session_completed")
               and sessions(http, run_id)["backend"]["llm_session_id"] != "")

    # An operator's stop is not overridden by a review: 409, nothing stored, the page says why.
    if status(http, run_id) == "session_completed":  # done again already: one more comment wakes it
        assert comment(http, pull["number"]).json()["status"] == "reopened"
    else:  # at work: the comment waits in its mailbox
        assert comment(http, pull["number"]).json()["status"] == "accepted"
    assert len(mailbox_messages(container, run_id, "backend")) == 2
    caught_up(http, container)
    backend = sessions(http, run_id)["backend"]
    stopped = session_verb(http, run_id, backend["session_id"], {"verb": "stop_session", "reason": "enough"})
    assert stopped.status_code == 202, stopped.text
    page = refused_comment(http, container, pull, "agent_stopped", "stopped by an operator")
    assert "stopped by an operator" in page.text

    # A run that has ended: none of its agents works again, so the comment is refused.
    assert run_verb(http, run_id, {"verb": "cleanup_run", "reason": "done"}).status_code == 202
    page = refused_comment(http, container, pull, "run_ended", "has ended")
    assert page.status_code == 200 and 'id="comment-closed"' in page.text
    assert http.get(f"{PROJECTS}/acme/pulls/{pull['number']}").json()["comment_closed"].startswith(f"Run {run_id} has ended")


def test_a_comment_on_a_line_outside_the_diff_is_a_422_that_stores_nothing(served: tuple[TestClient, Any]) -> None:
    http, container = served
    run_id = launch(http, container)
    pull = tick_until(http, container, [run_id], lambda: backend_pull(http, run_id))
    lines = len(http.get(f"{PROJECTS}/acme/pulls/{pull['number']}").json()["files"][0]["hunks"][0]["lines"])
    before = container.event_store.max_position()
    for changes, field in (({"line": lines + 1}, "line"), ({"line": 1, "side": "old"}, "line"), ({"path": "README.md"}, "path"),
                           ({"line": 10_000_000}, "line")):
        refused = comment(http, pull["number"], **changes)
        assert refused.status_code == 422, (changes, refused.text)
        assert refused.json()["detail"][0]["loc"] == ["body", field], refused.text
    assert container.event_store.max_position() == before and mailbox_messages(container, run_id, "backend") == []
    assert comment(http, pull["number"], line=lines).status_code == 202  # its last line is in the diff
