"""Documents as projectors see them, and the projector contract.

A projector is a pure fold: ``apply(envelope, docs)`` reads and writes JSON documents by
key and nothing else (no clock, no I/O). The same fold runs live (documents cached per
batch over the store), in a rebuild (documents in memory, swapped in at the end) and for
time travel (documents in memory, never stored), so all three agree byte for byte.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Protocol

import msgspec

from projections.engine.envelope import Envelope
from projections.engine.store import Change, DocStore, Row

encode = msgspec.json.Encoder(order="sorted").encode
decode = msgspec.json.Decoder(dict).decode


class Meta(msgspec.Struct, frozen=True, gc=False):
    p: str = ""
    g: str = ""
    s: str = ""
    st: str = ""


_ABSENT = object()


class Docs(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(self, key: str, doc: dict[str, Any], *, p: str = "", g: str = "", s: str = "", st: str = "") -> None: ...

    def delete(self, key: str) -> None: ...


class Projector(ABC):
    """Base of every projector: a name (its table), the event kinds it reads, a fold."""

    name: ClassVar[str] = ""
    topics: ClassVar[frozenset[str]] = frozenset()
    # Readers keep copies of its documents: its commits announce what they changed.
    announced: ClassVar[bool] = False

    def wants(self, env: Envelope) -> bool:
        """Whether ``apply`` reads events of ``env``'s kind: answered from ``env.kind`` alone
        (a rebuild asks once per kind and routes every event of that kind the same way)."""
        return not self.topics or env.kind in self.topics

    @abstractmethod
    def apply(self, env: Envelope, docs: Docs) -> None:
        """Folds one event into the documents it changes."""

    def memory_docs(self) -> MemoryDocs:
        """The documents a rebuild folds into."""
        return MemoryDocs()


class DerivedProjector(Projector):
    """A read model composed from other read models' documents (``sources``).

    Live, the runner folds the other projectors' batches first, then asks ``derive`` for
    this model's row changes as those batches leave the documents, and commits them in the
    same transaction: the derived model is never behind or ahead of what it is made of.
    A rebuild composes it from its sources as they are stored (``swap_composed``), after
    they were rebuilt when they are rebuilt too, instead of folding them again.
    """

    sources: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def derive(
        self, store: DocStore, batches: Mapping[str, BatchDocs], positions: Mapping[str, int], last: int
    ) -> Change | None:
        """The rows to commit with ``batches`` (folded up to ``last``), or None: nothing to do."""

    @abstractmethod
    def swap_composed(self, store: DocStore, source: Any, page_size: int) -> int:
        """Rebuild: the model composed from its stored sources, swapped in blue/green
        (``DocStore.swap_in``); answers the position it was left at. ``source`` is the
        log (``NotificationSource``), for the events that came in meanwhile."""


class MemoryDocs:
    """Documents in memory: rebuilds and time travel."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[Meta, dict[str, Any]]] = {}
        self.deleted: set[str] = set()
        self.dirty: set[str] = set()

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self.docs.get(key)
        return entry[1] if entry else None

    def put(self, key: str, doc: dict[str, Any], *, p: str = "", g: str = "", s: str = "", st: str = "") -> None:
        self.docs[key] = (Meta(p, g, s, st), doc)
        self.deleted.discard(key)
        self.dirty.add(key)

    def delete(self, key: str) -> None:
        self.docs.pop(key, None)
        self.dirty.discard(key)
        self.deleted.add(key)

    def rows(self) -> Iterator[Row]:
        for key in sorted(self.docs):
            meta, doc = self.docs[key]
            yield Row(key, meta.p, meta.g, meta.s, meta.st, encode(doc))

    def take_changes(self) -> tuple[list[Row], list[str]]:
        """Rows written and keys deleted since the last call."""
        upserts = []
        for key in sorted(self.dirty):
            meta, doc = self.docs[key]
            upserts.append(Row(key, meta.p, meta.g, meta.s, meta.st, encode(doc)))
        deletes = sorted(self.deleted)
        self.dirty = set()
        self.deleted = set()
        return upserts, deletes


class DocCache:
    """A runner's memory of a read model's documents between batches (LRU, bounded).

    It is only trusted while this runner is the one moving the projector's position:
    the runner clears it whenever a commit fails or the position moved under it, and
    documents mutated by a batch that did not commit never survive.
    """

    def __init__(self, max_docs: int = 5_000) -> None:
        self.max_docs = max_docs
        self.docs: OrderedDict[str, Any] = OrderedDict()

    def get(self, key: str) -> Any:
        doc = self.docs.get(key, _ABSENT)
        if doc is not _ABSENT:
            self.docs.move_to_end(key)
        return doc

    def keep(self, docs: dict[str, Any]) -> None:
        self.docs.update(docs)
        for key in docs:
            self.docs.move_to_end(key)
        while len(self.docs) > self.max_docs:
            self.docs.popitem(last=False)

    def clear(self) -> None:
        self.docs.clear()


class BatchDocs:
    """Documents of one live batch: read through to the store, written back at commit."""

    def __init__(self, store: DocStore, name: str, remembered: DocCache | None = None) -> None:
        self.store = store
        self.name = name
        self.remembered = remembered
        self.cache: dict[str, Any] = {}
        self.meta: dict[str, Meta] = {}
        self.dirty: set[str] = set()
        self.deleted: set[str] = set()

    def get(self, key: str) -> dict[str, Any] | None:
        doc = self.cache.get(key, _ABSENT)
        if doc is _ABSENT and self.remembered is not None:
            doc = self.remembered.get(key)
        if doc is _ABSENT:
            raw = self.store.get(self.name, key)
            doc = decode(raw) if raw is not None else None
        self.cache[key] = doc
        return doc

    def put(self, key: str, doc: dict[str, Any], *, p: str = "", g: str = "", s: str = "", st: str = "") -> None:
        self.cache[key] = doc
        self.meta[key] = Meta(p, g, s, st)
        self.dirty.add(key)
        self.deleted.discard(key)

    def delete(self, key: str) -> None:
        self.cache[key] = None
        self.dirty.discard(key)
        self.deleted.add(key)

    def changes(self) -> tuple[list[Row], list[str]]:
        upserts = []
        for key in sorted(self.dirty):
            meta = self.meta[key]
            upserts.append(Row(key, meta.p, meta.g, meta.s, meta.st, encode(self.cache[key])))
        return upserts, sorted(self.deleted)
