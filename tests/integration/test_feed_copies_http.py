"""The API's copies of stored feeds, on PostgreSQL: the same bytes as the store, current
after every projected change (read-your-writes included), access checked on every
answer, and dropped when the announcement channel is lost."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from litestar.testing import TestClient

from api import access
from api.studio.feed import COPIED, FeedReads
from projections.engine.copies import APPLICATION, ReadCopies
from projections.portal.relations import NAME as RELATIONS
from projections.studio.feed_doc import FEED, answer, feed_doc_key, feed_max_key
from tests.conftest import admin_api
from tests.integration.test_control_plane_http import FEED as FEED_PATH
from tests.integration.test_control_plane_http import MEMBER, PROJECT, STRANGER, launch
from workers.bootstrap import Container

WAIT = 20.0


@pytest.fixture
def world(pg_url: str) -> Iterator[tuple[TestClient, Container, FeedReads]]:
    with admin_api(pg_url) as (client, container):
        reads: FeedReads = client.app.state["feed_reads"]
        assert reads.copies is not None and reads.copies.wait(lambda c: c.listening, WAIT)
        yield client, container, reads


def copies_of(reads: FeedReads) -> ReadCopies:
    assert reads.copies is not None
    return reads.copies


def stored(container: Container, run_id: str, *, limit: int = 50) -> bytes:
    key = feed_doc_key if limit == 50 else feed_max_key
    body = container.store.get(FEED, key("default", "acme", run_id))
    assert body is not None
    return answer(body, limit)


def launched(http: TestClient, container: Container) -> str:
    assert http.post("/v1/project-factory/projects", json=PROJECT).status_code == 201
    run_id = launch(http)
    position = container.event_store.max_position()
    assert container.runner.wait_for(position, timeout=WAIT)
    # The API hears of those commits through their announcements, a moment later: a copy
    # kept before it heard them would be dropped by them (the faster the projector ends its
    # pass, the likelier).
    copies = copies_of(http.app.state["feed_reads"])
    assert copies.wait(lambda c: all(c.heard_position(name) >= position for name in COPIED), WAIT)
    return run_id


def store_unread(reads: FeedReads, monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on a read that reaches the store fails the test: copies must answer."""

    def refused(*_args: object) -> bytes:
        raise AssertionError("the store was read although a current copy was held")

    monkeypatch.setattr(reads, "feed", refused)


def test_a_copy_answers_the_stored_bytes(
    world: tuple[TestClient, Container, FeedReads], monkeypatch: pytest.MonkeyPatch
) -> None:
    http, container, reads = world
    run_id = launched(http, container)
    for limit in (50, 200, 7):
        query = {"project_slug": "acme", "run_id": run_id, "limit": limit}
        first = http.get(FEED_PATH, params=query)  # read from the store, kept
        assert first.status_code == 200 and first.content == stored(container, run_id, limit=limit)
    store_unread(reads, monkeypatch)
    for limit in (50, 200, 7):
        again = http.get(FEED_PATH, params={"project_slug": "acme", "run_id": run_id, "limit": limit})
        assert again.status_code == 200 and again.content == stored(container, run_id, limit=limit)


def test_access_is_checked_on_every_answer_from_memory(
    world: tuple[TestClient, Container, FeedReads], monkeypatch: pytest.MonkeyPatch
) -> None:
    http, container, reads = world
    run_id = launched(http, container)
    query = {"project_slug": "acme", "run_id": run_id}
    assert http.get(FEED_PATH, params=query).status_code == 200
    other = http.get(FEED_PATH, params=query, headers={"X-Squadops-Tenant-Id": "other"})
    assert (other.status_code, other.json()["code"]) == (404, "project_not_found")
    store_unread(reads, monkeypatch)
    assert copies_of(reads).stats()["copies"] >= 2
    denied = http.get(FEED_PATH, params=query, headers={**STRANGER, "x-edge-claim-groups": ""})
    assert (denied.status_code, denied.json()["code"]) == (403, "not_a_participant")
    bare = http.get(FEED_PATH, params=query, headers={"x-edge-claim-email": "", "x-edge-claim-groups": ""})
    assert (bare.status_code, bare.json()["code"]) == (401, "unauthenticated")
    member = http.get(FEED_PATH, params=query, headers={**MEMBER, "x-edge-claim-groups": ""})
    assert member.status_code == 200 and member.content == stored(container, run_id)


def test_a_projected_change_is_served_at_once(world: tuple[TestClient, Container, FeedReads]) -> None:
    http, container, reads = world
    run_id = launched(http, container)
    query = {"project_slug": "acme", "run_id": run_id}
    before = http.get(FEED_PATH, params=query).content
    assert http.get(FEED_PATH, params=query).content == before  # held in memory now
    # A command through the API: its answer's position, then the feed read at it.
    executed = http.post(f"/v1/admin/studio/runs/{run_id}/execute")
    assert executed.status_code in (200, 202), executed.text
    position = executed.headers["X-Squadops-Position"]
    after = http.get(FEED_PATH, params=query, headers={"X-Squadops-Min-Position": position})
    assert after.status_code == 200 and after.content != before
    assert after.content == stored(container, run_id)
    # Without the header too: a command this process answered is a position copies wait for.
    assert http.get(FEED_PATH, params=query).content == stored(container, run_id)
    # A change recorded elsewhere (the domain, not this API): read at its position.
    container.studio.runs.request_execution(tenant="default", run_id=run_id, requested_by="ops@example.com")
    changed = container.event_store.max_position()
    ahead = http.get(FEED_PATH, params=query, headers={"X-Squadops-Min-Position": str(changed)})
    assert ahead.status_code == 200 and ahead.content == stored(container, run_id)
    # Once the announcement is heard, the copy held is the store's document again.
    assert copies_of(reads).wait(lambda c: c.heard_position(FEED) >= changed, WAIT)
    assert http.get(FEED_PATH, params=query).content == stored(container, run_id)


def test_a_lost_channel_drops_the_copies(world: tuple[TestClient, Container, FeedReads], pg_url: str) -> None:
    http, container, reads = world
    run_id = launched(http, container)
    query = {"project_slug": "acme", "run_id": run_id}
    assert http.get(FEED_PATH, params=query).status_code == 200
    copies = copies_of(reads)
    assert copies.stats()["copies"] >= 2
    with psycopg.connect(pg_url, autocommit=True) as conn:
        ended = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
            (APPLICATION,),
        ).fetchall()
    assert ended and all(row[0] for row in ended)
    assert copies.wait(lambda c: c.stats()["copies"] == 0, WAIT)
    # Reads go on (from the store), and copies come back once the channel listens again.
    assert http.get(FEED_PATH, params=query).content == stored(container, run_id)
    assert copies.wait(lambda c: c.listening, WAIT)
    assert http.get(FEED_PATH, params=query).content == stored(container, run_id)
    assert copies.stats()["copies"] >= 2


def test_a_participant_is_decided_from_memory_until_removed(
    world: tuple[TestClient, Container, FeedReads], monkeypatch: pytest.MonkeyPatch
) -> None:
    http, container, reads = world
    run_id = launched(http, container)
    query = {"project_slug": "acme", "run_id": run_id}
    member = {**MEMBER, "x-edge-claim-groups": ""}
    assert http.get(FEED_PATH, params=query, headers=member).status_code == 200  # tuples kept

    def no_thread(*_args: object) -> None:
        raise AssertionError("access was decided in a thread although its tuples were in memory")

    with monkeypatch.context() as patched:
        patched.setattr(access, "_decide", no_thread)
        store_unread(reads, patched)
        again = http.get(FEED_PATH, params=query, headers=member)
        assert again.status_code == 200 and again.content == stored(container, run_id)
    # The participant leaves: at the position of that change, the copies refuse at once.
    container.projects.remove_participant(
        tenant="default", project_slug="acme", subject_key="dev@example.com", removed_by="ops@example.com"
    )
    removed = str(container.event_store.max_position())
    refused = http.get(FEED_PATH, params=query, headers={**member, "X-Squadops-Min-Position": removed})
    assert (refused.status_code, refused.json()["code"]) == (403, "not_a_participant")
    assert copies_of(reads).wait(lambda c: c.heard_position(RELATIONS) >= int(removed), WAIT)
    assert http.get(FEED_PATH, params=query, headers=member).status_code == 403
