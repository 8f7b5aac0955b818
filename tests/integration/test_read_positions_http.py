"""C19 over HTTP: commands answer their log position, reads wait for it, health tells the truth.

The API runs without a projector of its own, as in production; the projector runs in a
second container on the same database (another process, as far as the API can tell).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from eventsourcing.persistence import StoredEvent
from litestar.testing import TestClient

from api.app import create_app
from tests.conftest import ADMIN, settings_for
from tests.helpers import DEMO_LIKE, eventually
from workers.bootstrap import Container, build

BASE = "/v1/admin/studio"
POSITION, MIN_POSITION = "X-Squadops-Position", "X-Squadops-Min-Position"


def fast(database_url: str, **changes: object) -> Container:
    values: dict[str, object] = {
        "projector_heartbeat_seconds": 0.1,
        "projector_stale_seconds": 1.0,
        # Long enough for a projector started meanwhile to catch up on a loaded machine.
        "min_position_wait_seconds": 1.0,
    }
    return build(settings_for(database_url, **{**values, **changes}))


@pytest.fixture
def api(database_url: str) -> Iterator[TestClient]:
    """The API with no projector anywhere (yet)."""
    container = fast(database_url)
    with TestClient(create_app(container, workers=())) as client:
        client.headers.update(ADMIN)
        yield client
    container.close()


@pytest.fixture
def projector(database_url: str) -> Iterator[Container]:
    """A projector in another container over the same database, not started."""
    other = fast(database_url)
    yield other
    other.close()


def launched(http: TestClient) -> tuple[str, int]:
    """Creates the project and launches a run; answers the run id and the launch's position."""
    created = http.post("/v1/project-factory/projects", json=DEMO_LIKE)
    assert created.status_code == 201, created.text
    started = time.monotonic()
    answer = http.post(f"{BASE}/runs", json={"template_id": "delivery-core", "project_slug": "acme"})
    assert answer.status_code == 201, answer.text
    http.app.state.launch_seconds = time.monotonic() - started
    assert int(created.headers[POSITION]) < int(answer.headers[POSITION])
    return answer.json()["run_id"], int(answer.headers[POSITION])


def test_a_command_without_a_projector_answers_its_log_position_at_once(database_url: str) -> None:
    # A command waits for read models only while a projector is alive: with none, even a
    # wait budget of 30 s is never spent (a waiting launch would take all of it).
    container = fast(database_url, min_position_wait_seconds=30.0)
    try:
        with TestClient(create_app(container, workers=())) as api:
            api.headers.update(ADMIN)
            commands_answer_at_once(api)
    finally:
        container.close()


def commands_answer_at_once(api: TestClient) -> None:
    run_id, position = launched(api)
    assert api.app.state.launch_seconds < 15.0, "a command waited for a projector that does not run"
    assert position == api.get("/healthz").json()["log_position"]
    execute = api.post(f"{BASE}/runs/{run_id}/execute")
    assert execute.status_code == 202 and int(execute.headers[POSITION]) > position
    verb = api.post(f"{BASE}/runs/{run_id}/control", json={"verb": "pause_session", "target_agent_id": "planner", "reason": "lunch"})
    assert verb.status_code == 202, verb.text
    assert int(verb.headers[POSITION]) > int(execute.headers[POSITION])
    preview = api.post(f"{BASE}/runs/{run_id}/preview", json={"note": "n"})
    assert preview.status_code == 200 and int(preview.headers[POSITION]) > int(verb.headers[POSITION])


def test_a_read_at_a_position_not_projected_is_503_lagging_never_404(
    api: TestClient, projector: Container
) -> None:
    run_id, position = launched(api)
    started = time.monotonic()
    answer = api.get(f"{BASE}/runs/{run_id}", headers={MIN_POSITION: str(position)})
    assert answer.status_code == 503, answer.text
    assert answer.json()["code"] == "read_model_lagging" and set(answer.json()) == {"detail", "code"}
    assert int(answer.headers["Retry-After"]) >= 1
    assert 1.0 <= time.monotonic() - started < 3.0  # waited its bound, then answered
    assert api.get(f"{BASE}/runs/{run_id}/session-state", headers={MIN_POSITION: str(position)}).status_code == 503

    # The projector starts while a read waits: a read answers once the position is projected,
    # and until then it is a 503 lagging, never a 404. (Starting and catching up may take the
    # projector longer than one read's 1 s bound on a loaded machine: reads are repeated.)
    threading.Timer(0.1, projector.start, args=(("projector",),)).start()
    answers = []

    def read_answers() -> bool:
        answers.append(api.get(f"{BASE}/runs/{run_id}", headers={MIN_POSITION: str(position)}))
        return answers[-1].status_code != 503

    eventually(read_answers, timeout=30)
    assert all(a.json()["code"] == "read_model_lagging" for a in answers[:-1]), [a.text for a in answers]
    answer = answers[-1]
    assert answer.status_code == 200, answer.text
    assert answer.json()["run_id"] == run_id
    feed = api.get(
        "/control-plane/studio/observability-feed",
        params={"project_slug": "acme", "run_id": run_id},
        headers={MIN_POSITION: str(position)},
    )
    assert feed.status_code == 200, feed.text


@pytest.mark.parametrize("raw", ["abc", "-1", "1.5", "", "99999999999999999999", "0x10"])
def test_a_malformed_min_position_is_a_422(api: TestClient, raw: str) -> None:
    answer = api.get(f"{BASE}/runs/run-x", headers={MIN_POSITION: raw})
    assert answer.status_code == 422, answer.text
    (item,) = answer.json()["detail"]
    assert item["loc"] == ["header", "x-squadops-min-position"]
    assert set(item) == {"loc", "msg", "type", "input", "ctx"}


def test_a_position_beyond_the_log_names_no_write_and_is_a_409(api: TestClient) -> None:
    _, position = launched(api)
    started = time.monotonic()
    answer = api.get(f"{BASE}/runs/run-x", headers={MIN_POSITION: str(position + 1)})
    assert answer.status_code == 409 and time.monotonic() - started < 0.4
    assert answer.json()["code"] == "position_ahead_of_log"  # as as_of_event beyond the log
    # 19 digits, as documented, past any 64-bit position: beyond the log too (a 422 before,
    # an undocumented refusal of a schema-valid header).
    furthest = api.get(f"{BASE}/runs/run-x", headers={MIN_POSITION: "9999999999999999999"})
    assert furthest.status_code == 409 and furthest.json()["code"] == "position_ahead_of_log"


def test_health_is_degraded_and_not_ready_while_no_projector_runs(api: TestClient, projector: Container) -> None:
    launched(api)
    health = api.get("/healthz").json()
    assert health["status"] == "degraded"
    runs = health["projectors"]["runs"]
    assert runs["running"] is False and runs["state"] == "not_running"
    assert runs["lag"] == health["log_position"] - health["projections"]["runs"] > 0
    ready = api.get("/readyz")
    assert ready.status_code == 503 and ready.json()["code"] == "projector_not_running"
    assert set(ready.json()) == {"detail", "code"} and ready.headers["Retry-After"]

    projector.start(("projector",))

    def caught_up() -> dict | None:
        health = api.get("/healthz").json()
        return health if all(p["lag"] == 0 for p in health["projectors"].values()) else None

    health = eventually(caught_up, timeout=10)
    assert health["status"] == "ok" and not health["detail"]
    assert all(p["running"] and p["state"] == "ok" for p in health["projectors"].values())
    assert api.get("/readyz").status_code == 200

    projector.stop()  # a stopped projector says so at once
    assert api.get("/healthz").json()["status"] == "degraded"
    assert api.get("/readyz").status_code == 503


def test_a_projector_stuck_on_an_event_is_behind(database_url: str) -> None:
    """It runs (it beats) but cannot fold an event: its lag grows past the bound."""
    # Stale only after 5 s: a loaded machine may hold back the beats of a projector that keeps
    # failing on its event, and "behind, yet running" is what is asked here, not "stale".
    container = fast(database_url, health_max_lag_seconds=0.3, projector_stale_seconds=5.0)
    try:
        with TestClient(create_app(container, workers=("projector",))) as http:
            http.headers.update(ADMIN)
            run_id, _ = launched(http)
            eventually(lambda: http.get("/readyz").status_code == 200, timeout=10)
            poison = StoredEvent(
                originator_id=f"run:default:{run_id}-x",
                originator_version=1,
                topic="domain.run:Run.Launched",
                state=b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-01-01T00:00:00+00:00"}}',
            )
            container.event_store.recorder.insert_events([poison])

            def stuck() -> tuple[httpx.Response, dict] | None:
                """Not ready, and the health says why: runs is behind, yet running."""
                ready, health = http.get("/readyz"), http.get("/healthz").json()
                runs = health["projectors"]["runs"]
                lagging = ready.status_code == 503 and ready.json()["code"] == "read_model_lagging"
                behind = health["status"] == "degraded" and runs["state"] == "behind" and runs["running"]
                return (ready, runs) if lagging and behind else None

            ready, runs = eventually(stuck, timeout=10)
            assert runs["lag"] >= 1 and runs["lag_seconds"] > 0.3
    finally:
        container.close()


def test_a_feed_read_at_a_position_includes_it(database_url: str) -> None:
    container = fast(database_url)  # the feed is a stored document, projected with the others
    try:
        with TestClient(create_app(container, workers=("projector",))) as http:
            http.headers.update(ADMIN)
            run_id, _ = launched(http)
            url, params = "/control-plane/studio/observability-feed", {"project_slug": "acme", "run_id": run_id}
            before = http.get(url, params=params).json()
            verb = http.post(
                f"{BASE}/runs/{run_id}/control",
                json={"verb": "comment_agent", "target_agent_id": "planner", "message": "look at issue 7"},
            )
            assert verb.status_code == 202, verb.text
            position = int(verb.headers[POSITION])
            after = http.get(url, params=params, headers={MIN_POSITION: str(position)}).json()
            newest = max(int(e["event_id"]) for e in after["live_events"])
            assert newest == position > max(int(e["event_id"]) for e in before["live_events"])
    finally:
        container.close()
