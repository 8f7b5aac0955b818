"""A rebuild's documents, bounded in memory: cold ones go to the read model's shadow table.

A rebuild folds the whole log (``projections.engine.rebuild``). Runs' events are clustered
in time, so most documents go cold once their run is over: after each page of events, the
documents not touched for the longest are written to the shadow table the rebuild will swap
in, and dropped from memory, until the documents of all the read models one process folds
weigh no more than its budget (``SpillMemory``). A later ``get`` of a spilled key reads it
back; a delete of one deletes it there. At the swap, what is still in memory is written and
the shadow is swapped in as before; the rows are the same bytes as with no budget.

Documents are weighed as ``DocMemory`` weighs them: their encoded size plus ``ENTRY_BYTES``
(the decoded objects take a few times more). A document is encoded to be weighed once per
page that changed it, not at every ``put``; those bytes are kept, and written as they are
when the document leaves memory untouched since (most documents are written once, such as
a transcript's entries), so it is not encoded twice. They are not weighed on top: the
weight stands in for the decoded document, which takes a few times more than its bytes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from projections.engine.docs import DocMemory, Meta, decode, encode
from projections.engine.store import SHADOW_BATCH, Row, Shadow

ENTRY_BYTES = DocMemory.ENTRY_BYTES


class Written:
    """Keys that may be in a shadow table: a Bloom filter of fixed size, so it does not grow
    with the log. It never forgets a key; a false "maybe" costs one read of the shadow."""

    def __init__(self, size_bytes: int) -> None:
        bits = max(1 << 15, min(1 << 32, size_bytes * 8))
        bits = 1 << (bits.bit_length() - 1)  # a power of two: the hash is masked, not divided
        self.mask = bits - 1
        self.bits = bytearray(bits >> 3)
        self.empty = True

    def add(self, key: str) -> None:
        h = hash(key)
        a, b = h & self.mask, (h >> 32) & self.mask
        self.bits[a >> 3] |= 1 << (a & 7)
        self.bits[b >> 3] |= 1 << (b & 7)
        self.empty = False

    def __contains__(self, key: str) -> bool:
        if self.empty:
            return False
        h = hash(key)
        a, b = h & self.mask, (h >> 32) & self.mask
        return bool(self.bits[a >> 3] & (1 << (a & 7))) and bool(self.bits[b >> 3] & (1 << (b & 7)))


class SpillDocs:
    """One read model's documents during a rebuild, over its shadow table (``Docs``).

    Between two ``settle`` calls (a page of events) ``get`` and ``put`` only note the keys
    they touch; ``settle`` weighs the documents changed and moves the touched ones to the
    young end of the line. ``evict`` then writes cold documents to the shadow (only those
    changed since they were last written) and forgets them.
    """

    def __init__(self, shadow: Shadow, written: Written) -> None:
        self.shadow = shadow
        self.docs: dict[str, tuple[Meta, dict[str, Any]]] = {}
        self.touched: dict[str, bool] = {}  # since the last settle; True: written (or deleted)
        self.line: OrderedDict[str, tuple[int, int]] = OrderedDict()  # key -> (page, weight), oldest first
        self.bytes = 0
        self.dirty: set[str] = set()  # in memory, changed since last written to the shadow
        # Encodings of dirty documents weighed at a settle and not touched since: their row's body.
        self.bodies: dict[str, bytes] = {}
        self.deleted: set[str] = set()  # deleted here, may still be in the shadow
        self.written = written  # shared by the read models of one rebuild: a key is a key
        self.leaving: list[Row] = []  # evicted, to be written
        self.spilled = 0  # rows written before the swap
        self.reloaded = 0  # rows read back

    # -- the Docs protocol ---------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self.docs.get(key)
        if entry is not None:
            self.touched.setdefault(key, False)
            return entry[1]
        if key not in self.written or key in self.deleted:
            return None
        row = self.shadow.get(key)
        if row is None:  # a false "maybe"
            return None
        self.reloaded += 1
        doc = decode(row.body)
        self.docs[key] = (Meta(row.partition, row.group, row.sort_key, row.status), doc)
        self.line[key] = (0, len(row.body) + ENTRY_BYTES)  # page 0: placed by the next settle
        self.bytes += len(row.body) + ENTRY_BYTES
        self.touched.setdefault(key, False)
        return doc

    def put(
        self, key: str, doc: dict[str, Any], *, partition: str = "", group: str = "", sort_key: str = "", status: str = ""
    ) -> None:
        self.docs[key] = (Meta(partition, group, sort_key, status), doc)
        self.touched[key] = True
        self.deleted.discard(key)

    def delete(self, key: str) -> None:
        if self.docs.pop(key, None) is not None:
            self.touched[key] = True  # settle forgets its weight
        self.dirty.discard(key)
        self.bodies.pop(key, None)
        if key in self.written:
            self.deleted.add(key)

    # -- memory ---------------------------------------------------------------------------------

    def settle(self, page: int, weigh: bool = True) -> None:
        """Takes in the keys touched since the last call: changed ones are dirty (and weighed
        again when ``weigh``), all move to the young end of the line as of ``page``. A changed
        document's weighed bytes are kept as its row's body (``bodies``) until it is touched
        again: a document read may have been changed in place."""
        touched, self.touched = self.touched, {}
        docs, line, dirty, bodies = self.docs, self.line, self.dirty, self.bodies
        for key, changed in touched.items():
            entry = docs.get(key)
            old = line.pop(key, None)
            if bodies and key in bodies:
                del bodies[key]
            if entry is None:  # deleted
                if old is not None:
                    self.bytes -= old[1]
                continue
            if changed:
                dirty.add(key)
            if weigh and (changed or old is None):
                body = encode(entry[1])
                size = len(body) + ENTRY_BYTES
                if changed:
                    bodies[key] = body
            else:
                size = old[1] if old is not None else ENTRY_BYTES
            self.bytes += size - (old[1] if old is not None else 0)
            line[key] = (page, size)

    def oldest(self) -> int:
        """The page the coldest document was last touched in."""
        return next(iter(self.line.values()))[0]

    def evict(self, page: int, excess: int) -> int:
        """Forgets the documents last touched at ``page`` or earlier, oldest first, until
        ``excess`` bytes are freed; the changed ones wait in ``leaving`` for ``spill``.
        Answers the bytes freed."""
        freed = 0
        line, docs, dirty, leaving, bodies = self.line, self.docs, self.dirty, self.leaving, self.bodies
        while line and freed < excess:
            key, (when, size) = next(iter(line.items()))
            if when > page:
                break
            line.popitem(last=False)
            meta, doc = docs.pop(key)
            freed += size
            body = bodies.pop(key, None)
            if key in dirty:
                dirty.discard(key)
                leaving.append(Row(key, meta.partition, meta.group, meta.sort_key, meta.status, body or encode(doc)))
        self.bytes -= freed
        return freed

    def spill(self) -> None:
        """Writes the evicted documents and the pending deletes to the shadow."""
        rows, self.leaving = self.leaving, []
        if rows or len(self.deleted) >= SHADOW_BATCH:
            self.spilled += len(rows)
            self._write(rows)

    def _write(self, rows: list[Row]) -> None:
        """Writes ``rows`` and the pending deletes to the shadow."""
        if not rows and not self.deleted:
            return
        rows.sort()
        written = self.written
        replaced = [row.key for row in rows if row.key in written]  # the shadow may hold them
        self.shadow.write(rows, sorted({*self.deleted, *replaced}))
        self.deleted = set()
        for row in rows:
            written.add(row.key)

    def flush(self) -> None:
        """Writes every changed document and pending delete (the fold is over); the
        documents stay in memory for the catch-up."""
        self.settle(0, weigh=False)
        self.spill()
        order = sorted(self.dirty)
        self.dirty = set()
        for start in range(0, len(order), SHADOW_BATCH):
            self._write(self._rows(order[start : start + SHADOW_BATCH]))
        self._write([])

    def _rows(self, keys: list[str]) -> list[Row]:
        """The rows of the documents ``keys`` (in memory): their kept bodies, else encoded."""
        docs, bodies, rows = self.docs, self.bodies, []
        for key in keys:
            meta, doc = docs[key]
            body = bodies.pop(key, None)
            rows.append(Row(key, meta.partition, meta.group, meta.sort_key, meta.status, body or encode(doc)))
        return rows

    def take_changes(self) -> tuple[list[Row], list[str]]:
        """Rows changed and keys deleted since ``flush`` (or the last call): the catch-up's."""
        self.settle(0, weigh=False)
        upserts = self._rows(sorted(self.dirty))
        deletes = sorted(self.deleted)
        self.dirty, self.deleted = set(), set()
        return upserts, deletes


class SpillMemory:
    """The documents of every read model one rebuild process folds, within ``max_bytes``
    (None: no bound, everything stays in memory until the swap). The coldest documents go
    first, whichever read model they belong to."""

    def __init__(self, max_bytes: int | None) -> None:
        self.max_bytes = max_bytes
        self.members: list[SpillDocs] = []
        self.page = 0
        # The keys written to the shadows: a 32nd of the budget (a false "maybe" costs a read).
        self.written = Written(max_bytes // 32 if max_bytes is not None else 1 << 20)

    def docs(self, shadow: Shadow) -> SpillDocs:
        member = SpillDocs(shadow, self.written)
        self.members.append(member)
        return member

    @property
    def bytes(self) -> int:
        return sum(m.bytes for m in self.members)

    def settle(self) -> None:
        """After a page of events: weighs what changed and spills the coldest documents
        until all of them fit in the budget."""
        self.page += 1
        bounded = self.max_bytes is not None
        for member in self.members:
            member.settle(self.page, weigh=bounded)
        if not bounded:
            return
        excess = self.bytes - self.max_bytes  # type: ignore[operator]
        while excess > 0:
            holding = [m for m in self.members if m.line]
            if not holding:
                break
            coldest = min(holding, key=SpillDocs.oldest)
            excess -= coldest.evict(coldest.oldest(), excess)
        for member in self.members:
            member.spill()

    def release(self, name: str) -> None:
        """The read model ``name`` was swapped in: its documents are let go."""
        self.members = [m for m in self.members if m.shadow.name != name]

    def figures(self) -> tuple[int, int]:
        """(rows spilled before the swap, rows read back) of the read models held."""
        return sum(m.spilled for m in self.members), sum(m.reloaded for m in self.members)
