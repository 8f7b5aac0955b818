"""A rebuild's documents within a budget (``projections.engine.spill``) behave as a plain
mapping: whatever is spilled and read back, written again or deleted, every ``get`` answers
what was last put, and the shadow ends with exactly the documents left, byte for byte."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.engine.docs import encode
from projections.engine.spill import SpillMemory, Written
from projections.engine.store import Row, Shadow


class DictShadow(Shadow):
    """A shadow table as a dict, recording what was asked of it; ``write`` refuses, as
    PostgreSQL's copy would, a row whose key is there and not deleted first."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.rows: dict[str, Row] = {}
        self.reads = 0
        self.deleted_after_write: set[str] = set()
        self.rewritten: set[str] = set()

    def write(self, upserts: Sequence[Row], deletes: Sequence[str]) -> None:
        for key in deletes:
            if self.rows.pop(key, None) is not None and key not in {r.key for r in upserts}:
                self.deleted_after_write.add(key)
        for row in upserts:
            assert row.key not in self.rows, f"{row.key} copied over a row not deleted first"
            if row.key in deletes:
                self.rewritten.add(row.key)
            self.rows[row.key] = row

    def get(self, key: str) -> Row | None:
        self.reads += 1
        return self.rows.get(key)

    def swap(self, position: int, catch_up: Any) -> int:
        upserts, deletes, final = catch_up(position)
        for key in deletes:
            self.rows.pop(key, None)
        self.rows.update((row.key, row) for row in upserts)
        return int(final)

    def drop(self) -> None:
        self.rows.clear()


KEYS = st.sampled_from([f"doc/{i}" for i in range(12)])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, st.integers(0, 40)),
        st.tuples(st.just("bump"), KEYS, st.integers(1, 3)),  # get, change, put back
        st.tuples(st.just("delete"), KEYS, st.just(0)),
        st.tuples(st.just("get"), KEYS, st.just(0)),
        st.tuples(st.just("page"), st.just(""), st.just(0)),
    ),
    max_size=120,
)


def play(memory: SpillMemory, docs: Any, model: dict[str, dict[str, Any]], ops: list[tuple[str, str, int]]) -> None:
    for op, key, n in ops:
        if op == "page":
            memory.settle()
        elif op == "put":
            doc = {"n": n, "pad": "x" * n, "list": list(range(n % 7))}
            docs.put(key, doc, partition="part", sort_key=f"{n:04d}")
            model[key] = copy.deepcopy(doc)
        elif op == "bump":
            doc = docs.get(key)
            assert doc == model.get(key)
            if doc is not None:
                doc["n"] += n
                doc.setdefault("bumps", []).append(n)
                docs.put(key, doc, partition="part", sort_key=f"{doc['n']:04d}")
                model[key] = copy.deepcopy(doc)
        elif op == "delete":
            docs.delete(key)
            model.pop(key, None)
        else:
            assert docs.get(key) == model.get(key)


@settings(max_examples=300, deadline=None)
@given(ops=OPS, more=OPS, budget=st.sampled_from([0, 1, 200, 600, None]))
def test_spilled_documents_read_back_and_end_in_the_shadow_as_they_were_left(
    ops: list[tuple[str, str, int]], more: list[tuple[str, str, int]], budget: int | None
) -> None:
    memory = SpillMemory(budget)
    shadow = DictShadow("things")
    docs = memory.docs(shadow)
    model: dict[str, dict[str, Any]] = {}
    play(memory, docs, model, ops)
    for key in {k for _, k, _ in ops if k}:
        assert docs.get(key) == model.get(key)
    if budget is not None:
        memory.settle()
        assert memory.bytes <= budget or not docs.line
    docs.flush()
    assert {k: r.body for k, r in shadow.rows.items()} == {k: encode(d) for k, d in model.items()}

    def catch_up(since: int) -> tuple[list[Row], list[str], int]:  # more events, the runner held off
        play(memory, docs, model, [op for op in more if op[0] != "page"])
        upserts, deletes = docs.take_changes()
        return upserts, deletes, since + 1

    assert shadow.swap(7, catch_up) == 8
    assert {k: r.body for k, r in shadow.rows.items()} == {k: encode(d) for k, d in model.items()}
    assert all(r.partition == "part" and r.sort_key == f"{model[k]['n']:04d}" for k, r in shadow.rows.items())


def test_a_tiny_budget_spills_every_page_reads_back_rewrites_and_deletes_in_the_shadow() -> None:
    memory = SpillMemory(1)
    shadow = DictShadow("things")
    docs = memory.docs(shadow)
    for i in range(50):
        docs.put(f"doc/{i}", {"i": i})
    memory.settle()
    assert len(shadow.rows) == 50 and not docs.docs and memory.bytes == 0  # all spilled
    assert docs.get("doc/7") == {"i": 7} and docs.get("doc/99") is None
    docs.put("doc/7", {"i": 70})
    docs.delete("doc/8")
    memory.settle()
    assert shadow.rows["doc/7"].body == b'{"i":70}' and "doc/7" in shadow.rewritten
    assert "doc/8" not in shadow.rows and "doc/8" in shadow.deleted_after_write
    assert docs.get("doc/8") is None
    docs.flush()
    assert len(shadow.rows) == 49


def test_the_coldest_documents_go_first_whichever_read_model_they_belong_to() -> None:
    memory = SpillMemory(10 * (64 + 8))
    a, b = DictShadow("a"), DictShadow("b")
    docs_a, docs_b = memory.docs(a), memory.docs(b)
    for i in range(6):
        docs_a.put(f"a/{i}", {"i": 10 + i})  # 8 bytes encoded: 72 with the entry's
    memory.settle()
    for i in range(6):
        docs_b.put(f"b/{i}", {"i": 10 + i})
    docs_a.get("a/5")  # touched again: young
    memory.settle()
    assert sorted(a.rows) == ["a/0", "a/1"] and not b.rows  # 12 documents, room for 10
    assert memory.bytes == 10 * 72


def test_the_filter_of_written_keys_never_forgets_one() -> None:
    written = Written(16)
    keys = [f"run/{i}/doc" for i in range(20_000)]
    for key in keys:
        written.add(key)
    assert all(key in written for key in keys)
    assert len(written.bits) == 4096  # bounded: its size is fixed, whatever is added
