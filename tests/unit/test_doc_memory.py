"""The projector's memory of documents between passes: bounded by bytes, shared, exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.engine.docs import BatchDocs, DocMemory, encode
from projections.engine.store import Row, SqliteDocStore

ENTRY = DocMemory.ENTRY_BYTES


def test_the_least_recently_used_document_of_any_read_model_goes_first() -> None:
    memory = DocMemory(max_bytes=3 * (100 + ENTRY))
    runs, pixels = memory.of("runs"), memory.of("pixels")
    runs.keep({"a": {"n": 1}}, {"a": 100})
    pixels.keep({"b": {"n": 2}}, {"b": 100})
    runs.keep({"c": {"n": 3}}, {"c": 100})
    assert runs.get("a")[0] == {"n": 1}  # used again: now the most recent
    pixels.keep({"d": {"n": 4}}, {"d": 100})  # over the bound: "b" is the oldest
    assert pixels.get("b")[1] == 0
    assert {k for k in ("a", "c") if runs.get(k)[1]} == {"a", "c"}
    assert memory.bytes == 3 * (100 + ENTRY)


def test_one_large_document_pushes_out_many_small_ones() -> None:
    memory = DocMemory(max_bytes=10_000)
    small = memory.of("runs")
    small.keep({f"k{i}": {} for i in range(50)}, {f"k{i}": 10 for i in range(50)})
    assert len(small) == 50
    memory.of("pixels").keep({"big": {"agents": []}}, {"big": 9_000})
    assert memory.bytes <= 10_000
    assert len(small) < 50


def test_clearing_one_read_model_leaves_the_others() -> None:
    memory = DocMemory()
    memory.of("runs").keep({"a": {}}, {"a": 5})
    memory.of("fleet").keep({"a": {}}, {"a": 7})
    memory.of("runs").clear()
    assert memory.of("runs").get("a")[1] == 0
    assert memory.of("fleet").get("a") == ({}, 7 + ENTRY)
    assert memory.bytes == 7 + ENTRY


def test_a_batch_weighs_documents_as_read_from_the_store_and_as_written(tmp_path: Path) -> None:
    store = SqliteDocStore(tmp_path / "reads.db")
    store.ensure("runs")
    store.commit("runs", 0, 1, [row("old", {"state": "running"})], [])
    memory = DocMemory()
    cache = memory.of("runs")
    docs = BatchDocs(store, "runs", cache)
    assert docs.get("old") == {"state": "running"}
    assert docs.sizes["old"] == len(encode({"state": "running"}))
    docs.put("new", {"state": "queued", "agents": ["planner", "curator"]})
    docs.changes()
    assert docs.sizes["new"] == len(encode({"state": "queued", "agents": ["planner", "curator"]}))
    cache.keep(docs.cache, docs.sizes)
    again = BatchDocs(store, "runs", cache)
    assert again.get("new") == {"state": "queued", "agents": ["planner", "curator"]}  # from memory
    assert again.sizes["new"] == docs.sizes["new"]


def row(key: str, doc: dict[str, Any]) -> Row:
    return Row(key, "", "", "", "", encode(doc))


ops = st.lists(
    st.one_of(
        st.tuples(st.just("keep"), st.sampled_from("xyz"), st.sampled_from("abcdef"), st.integers(0, 400)),
        st.tuples(st.just("get"), st.sampled_from("xyz"), st.sampled_from("abcdef"), st.just(0)),
        st.tuples(st.just("clear"), st.sampled_from("xyz"), st.just(""), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(0, 2_000))
def test_memory_never_exceeds_its_bound_and_weighs_exactly_what_it_holds(steps: list[tuple], bound: int) -> None:
    memory = DocMemory(max_bytes=bound)
    for op, name, key, size in steps:
        cache = memory.of(name)
        if op == "keep":
            cache.keep({key: {"v": size}}, {key: size})
            held = cache.get(key)
            if size + ENTRY <= bound:
                assert held == ({"v": size}, size + ENTRY)  # the newest always stays when it fits
        elif op == "get":
            cache.get(key)
        else:
            cache.clear()
            assert len(cache) == 0
        assert memory.bytes <= bound
        assert memory.bytes == sum(w for _, w in memory.entries.values())
        assert sorted(memory.entries) == sorted((n, k) for n, keys in memory.names.items() for k in keys)
