"""Copies of read-model documents: what an announcement drops, when a copy may serve, the
bound, and what a lost channel does (``projections.engine.copies``, no database)."""

from __future__ import annotations

from projections.engine import announce
from projections.engine.copies import ReadCopies


def listening(**positions: int) -> ReadCopies:
    copies = ReadCopies(["feed", "projects"], max_bytes=1000, max_entries=4)
    copies.opened(positions)
    return copies


def fill(copies: ReadCopies, name: str, key: str, body: bytes) -> None:
    assert copies.keep(copies.mark(), {(name, key): body})


def said(name: str, position: int, keys: list[str] | None) -> list[str]:
    return announce.entries(name, position, keys)


def test_announcements_split_keys_and_put_the_position_last() -> None:
    keys = [f"feed/default/acme/run-{i:04d}/max" for i in range(600)]
    payloads = said("feed", 42, keys)
    assert len(payloads) > 1 and all(len(p.encode()) <= announce.PAYLOAD_BYTES for p in payloads)
    entries = [announce.read(p) for p in payloads]
    assert [k for e in entries for k in e.keys] == keys
    assert [e.position for e in entries] == [0] * (len(entries) - 1) + [42]
    assert announce.read(said("feed", 7, None)[0]) == announce.Entry("feed", 7, None)
    assert announce.read("not json") is None


def test_a_copy_serves_once_heard_at_the_asked_position() -> None:
    copies = listening(feed=10, projects=10)
    fill(copies, "feed", "k", b"v1")
    assert copies.get("feed", "k").body == b"v1"
    assert copies.get("feed", "k", at_least=11) is None  # X-Squadops-Min-Position beyond what was heard
    for payload in said("feed", 11, []):  # a commit that changed no document of the feed
        copies.heard(payload)
    assert copies.get("feed", "k", at_least=11).body == b"v1"
    copies.expect(12)  # a command of this process answered position 12
    assert copies.get("feed", "k") is None
    for payload in said("feed", 12, ["other"]):
        copies.heard(payload)
    assert copies.get("feed", "k").body == b"v1"


def test_an_announced_key_drops_its_copy_and_only_it() -> None:
    copies = listening(feed=1, projects=1)
    fill(copies, "feed", "a", b"A")
    fill(copies, "feed", "b", b"B")
    fill(copies, "projects", "a", b"P")
    for payload in said("feed", 2, ["a"]):
        copies.heard(payload)
    assert copies.get("feed", "a") is None
    assert copies.get("feed", "b").body == b"B" and copies.get("projects", "a").body == b"P"
    for payload in said("feed", 3, None):  # a swap: every copy of the model
        copies.heard(payload)
    assert copies.get("feed", "b") is None and copies.get("projects", "a").body == b"P"


def test_what_was_read_before_an_announcement_is_not_kept() -> None:
    copies = listening(feed=1, projects=1)
    mark = copies.mark()
    for payload in said("feed", 2, ["k"]):  # committed while the store was being read
        copies.heard(payload)
    assert not copies.keep(mark, {("feed", "k"): b"old"})
    assert copies.get("feed", "k") is None
    assert copies.keep(copies.mark(), {("feed", "k"): b"new"})
    assert copies.get("feed", "k").body == b"new"


def test_a_lost_channel_drops_every_copy_and_keeps_none_until_it_listens() -> None:
    copies = listening(feed=1, projects=1)
    fill(copies, "feed", "k", b"v")
    mark = copies.mark()
    copies.lost()
    assert not copies.listening and copies.get("feed", "k") is None and copies.stats()["copies"] == 0
    assert copies.mark() is None and not copies.keep(mark, {("feed", "k"): b"v"})
    assert not copies.keep(None, {("feed", "k"): b"v"})
    copies.opened({"feed": 5, "projects": 5})
    assert copies.get("feed", "k") is None  # nothing survives a reconnection
    fill(copies, "feed", "k", b"v2")
    assert copies.get("feed", "k", at_least=5).body == b"v2"


def test_an_unreadable_announcement_drops_every_copy() -> None:
    copies = listening(feed=1, projects=1)
    fill(copies, "feed", "k", b"v")
    copies.heard("{broken")
    assert copies.get("feed", "k") is None


def test_memory_is_bounded_least_recently_used_first() -> None:
    copies = listening(feed=1, projects=1)
    for i in range(4):
        fill(copies, "feed", f"k{i}", b"x" * 100)
    assert copies.get("feed", "k0") is not None  # k0 used: k1 is now the oldest
    fill(copies, "feed", "k4", b"x" * 100)
    assert copies.get("feed", "k1") is None and copies.get("feed", "k0") is not None
    fill(copies, "feed", "big", b"y" * 900)  # over the byte bound: the oldest go
    assert copies.stats()["bytes"] <= 1000 and copies.get("feed", "big") is not None
    copy = copies.get("feed", "big")
    copies.derive("feed", "big", copy, 7, b"z" * 300)  # derived answers count too
    assert copies.stats()["bytes"] <= 1000
