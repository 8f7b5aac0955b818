"""A rebuild within a memory budget: cold documents go to the shadow table as the fold goes,
and the read models swapped in are byte for byte those of a rebuild with no budget and of
live projection, on both backends. A rebuild that fails leaves the read models as they
were, and no shadow table behind."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from projections.engine.rebuild import rebuild
from projections.engine.runner import NotificationSource
from projections.engine.store import DocStore, Row, Shadow, SqliteDocStore
from tests.conftest import settings_for
from tests.feed_scenarios import TENANT
from workers.bootstrap import Container, build, read_projectors

OPERATOR = "op@example.com"


def dumps(store: DocStore) -> dict[str, list[Row]]:
    return {p.name: store.dump(p.name) for p in read_projectors()}


def shadow_tables(store: DocStore) -> list[str]:
    if isinstance(store, SqliteDocStore):
        rows = store._conn().execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    else:
        with store.pool.connection() as conn:  # type: ignore[attr-defined]
            rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    return sorted(name for (name,) in rows if name.endswith("__shadow"))


class SpyShadow(Shadow):
    """The store's shadow, noting the keys written before the swap, read back, and deleted
    from it after they were written."""

    def __init__(self, real: Shadow, seen: dict[str, set[str]]) -> None:
        super().__init__(real.name)
        self.real, self.seen = real, seen

    def write(self, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        written = self.seen.setdefault("written", set())
        self.seen.setdefault("rewritten", set()).update(f"{self.name}:{r.key}" for r in upserts if f"{self.name}:{r.key}" in written)
        self.seen.setdefault("deleted", set()).update(f"{self.name}:{k}" for k in deletes if f"{self.name}:{k}" in written)
        written.update(f"{self.name}:{r.key}" for r in upserts)
        self.real.write(upserts, deletes)

    def get(self, key: str) -> Row | None:
        row = self.real.get(key)
        if row is not None:
            self.seen.setdefault("read", set()).add(f"{self.name}:{key}")
        return row

    def swap(self, position: int, catch_up: Any) -> int:
        return self.real.swap(position, catch_up)

    def drop(self) -> None:
        self.real.drop()


@pytest.fixture
def simulated(database_url: str) -> Iterator[Container]:
    """Three simulated runs of a project, projected live."""
    container = build(settings_for(database_url, tick_seconds=0.001))
    try:
        seed = {"project_key": "acme", "project_assembly": {"agentSquadSuitTesterRoles": ["admin", "guest", "ops"]}}
        container.projects.create_project(tenant=TENANT, request=seed, created_by=OPERATOR)
        for _ in range(3):
            run = container.studio.runs.launch_run(
                tenant=TENANT, template_id="delivery-core", project_slug="acme", launched_by=OPERATOR
            )[0]
            container.studio.runs.request_execution(tenant=TENANT, run_id=run.run_id, requested_by=OPERATOR)
            for _ in range(25):  # runs mostly one after the other, as in a real log
                container.runner.run_once()
                container.ticker.run_once()
        while container.runner.run_once():
            pass
        yield container
    finally:
        container.close()


def test_a_rebuild_within_a_tiny_budget_swaps_in_the_rows_of_live_projection_and_of_no_budget(
    simulated: Container, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, source = simulated.store, NotificationSource(simulated.event_store)
    live = dumps(store)
    assert sum(len(rows) for rows in live.values()) > 100
    unbounded = rebuild(store, source, read_projectors(), page_size=50)
    assert dumps(store) == live
    assert unbounded.spilled == unbounded.reloaded == 0
    seen: dict[str, set[str]] = {}
    opening = store.open_shadow
    monkeypatch.setattr(store, "open_shadow", lambda name: SpyShadow(opening(name), seen))
    bounded = rebuild(store, source, read_projectors(), page_size=20, memory_bytes=4096)
    assert dumps(store) == live
    assert bounded.position == unbounded.position == simulated.event_store.max_position()
    # Most documents left memory before the swap; some were needed again, read back and
    # written again; some were deleted after they were spilled.
    assert bounded.spilled > sum(len(rows) for rows in live.values()) // 2
    assert bounded.reloaded > 0 and seen["read"] and seen["rewritten"] and seen["deleted"]
    assert shadow_tables(store) == []


def test_a_rebuild_that_fails_mid_fold_leaves_the_read_models_as_they_were_and_no_shadow(simulated: Container) -> None:
    store, source = simulated.store, NotificationSource(simulated.event_store)
    live, positions = dumps(store), store.positions()
    pages: list[int] = []

    def fail_on_the_fifth_page(position: int, *_: Any) -> None:
        pages.append(position)
        if len(pages) == 5:
            assert shadow_tables(store)  # the shadows were open and being filled
            raise RuntimeError("injected mid-fold")

    with pytest.raises(RuntimeError, match="injected mid-fold"):
        rebuild(store, source, read_projectors(), page_size=20, memory_bytes=4096, progress=fail_on_the_fifth_page)
    assert dumps(store) == live and store.positions() == positions
    assert shadow_tables(store) == []
    # and the next rebuild goes through
    rebuild(store, source, read_projectors(), page_size=20, memory_bytes=4096)
    assert dumps(store) == live and shadow_tables(store) == []


def test_a_rebuild_that_fails_while_swapping_keeps_what_it_swapped_and_drops_the_rest(simulated: Container) -> None:
    store, source = simulated.store, NotificationSource(simulated.event_store)
    live, positions = dumps(store), store.positions()
    projectors = read_projectors()
    swapping = type(store).open_shadow

    def open_shadow(name: str) -> Shadow:
        shadow = swapping(store, name)
        if name == "pixels":
            def refuse(position: int, catch_up: Any) -> int:
                raise RuntimeError("injected at the swap")

            shadow.swap = refuse  # type: ignore[method-assign]
        return shadow

    store.open_shadow = open_shadow  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="injected at the swap"):
            rebuild(store, source, projectors, page_size=20, memory_bytes=4096)
    finally:
        del store.open_shadow  # type: ignore[attr-defined]
    assert dumps(store) == live and shadow_tables(store) == []
    assert store.positions() == positions  # those before it were swapped in (the same rows)
