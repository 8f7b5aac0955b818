"""Documents as projectors see them, and the projector contract.

A projector is a pure fold: ``apply(envelope, docs)`` reads and writes JSON documents by
key and nothing else (no clock, no I/O). The same fold runs live (documents cached per
batch over the store), in a rebuild (documents in memory, the cold ones in the shadow table
swapped in at the end: ``projections.engine.spill``) and for time travel (documents in
memory, never stored), so all three agree byte for byte.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Protocol, TypeVar

import msgspec

from projections.engine.envelope import Envelope
from projections.engine.store import Change, DocStore, Row

encode = msgspec.json.Encoder(order="sorted").encode
decode = msgspec.json.Decoder(dict).decode
H = TypeVar("H", bound=Callable[..., Any])


class Meta(msgspec.Struct, frozen=True, gc=False):
    """A document's attributes to list it by (``Row`` without the key and body)."""

    partition: str = ""
    group: str = ""
    sort_key: str = ""
    status: str = ""


_ABSENT = object()


class Docs(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...

    def put(
        self, key: str, doc: dict[str, Any], *, partition: str = "", group: str = "", sort_key: str = "", status: str = ""
    ) -> None: ...

    def delete(self, key: str) -> None: ...


def tenant_scoped(prefix: str) -> Callable[[str, str], str]:
    """The key (or partition) of a tenant's document of one thing: ``tenant_scoped("run")``
    answers ``(tenant, run_id) -> "run/<tenant>/<run_id>"``."""

    def key(tenant: str, ident: str) -> str:
        return f"{prefix}/{tenant}/{ident}"

    return key


def handles(*event_types: type) -> Callable[[H], H]:
    """Marks a projector's method as the handler of events of ``event_types`` (the classes
    the areas declare in their ``events.py``); it is called ``(event, env, docs)``."""

    def mark(method: H) -> H:
        method.handled = event_types  # type: ignore[attr-defined]
        return method

    return mark


def folds_with(*args: Any) -> Callable[..., None]:
    """A handler that hands its event to the projector's own ``fold(e, env, docs, *args)``:
    for read models whose events differ only in what they give their one fold."""

    def handler(self: Any, e: Any, env: Envelope, docs: Docs) -> None:
        self.fold(e, env, docs, *args)

    return handler


class Handlers:
    """Methods marked ``@handles(SomeEvent)`` (``handlers``: event class -> method), looked up
    by an event's class: the one way every fold and mapping of events dispatches."""

    handlers: ClassVar[dict[type, Callable[..., Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.handlers = {
            event_type: method
            for klass in reversed(cls.__mro__)
            for method in vars(klass).values()
            for event_type in getattr(method, "handled", ())
        }
        cls._resolved: dict[type, Callable[..., Any] | None] = {}

    def handler(self, event_type: type) -> Callable[..., Any] | None:
        """The handler of ``event_type``, or of the declared class it subclasses (the event
        store reads an event back as its aggregate's subclass of the declared class)."""
        resolved = self._resolved
        try:
            return resolved[event_type]
        except KeyError:
            handlers = self.handlers
            found = next((handlers[base] for base in event_type.__mro__ if base in handlers), None)
            resolved[event_type] = found  # one assignment: safe to race, every thread finds the same
            return found


class Projector(Handlers):
    """Base of every projector: a name (its table), the event kinds it reads, a fold.

    A projector folds an event by its class: one method per event class it reads, marked
    ``@handles(RunLaunched)`` and named for the event (``run_launched``). The kinds it
    reads (``topics``) are those of the classes it handles.
    """

    name: ClassVar[str] = ""
    topics: ClassVar[frozenset[str]] = frozenset()
    # Readers keep copies of its documents: its commits announce what they changed.
    announced: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.handlers:
            cls.topics = frozenset(str(t.TOPIC).rpartition(":")[2] for t in cls.handlers)  # type: ignore[attr-defined]

    def wants(self, env: Envelope) -> bool:
        """Whether ``apply`` reads events of ``env``'s kind: answered from ``env.kind`` alone
        (a rebuild asks once per kind and routes every event of that kind the same way)."""
        return not self.topics or env.kind in self.topics

    def apply(self, env: Envelope, docs: Docs) -> None:
        """Folds one event into the documents it changes: its class's handler, if any."""
        handler = self.handler(type(env.event))
        if handler is not None:
            handler(self, env.event, env, docs)

    def memory_docs(self) -> MemoryDocs:
        """Documents in memory to fold the whole log into: the definition live projection
        and rebuilds are compared with."""
        return MemoryDocs()


class DerivedProjector(Projector, ABC):
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
    """Documents in memory: time travel, and the definition of a read model in tests."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[Meta, dict[str, Any]]] = {}
        self.deleted: set[str] = set()
        self.dirty: set[str] = set()

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self.docs.get(key)
        return entry[1] if entry else None

    def put(
        self, key: str, doc: dict[str, Any], *, partition: str = "", group: str = "", sort_key: str = "", status: str = ""
    ) -> None:
        self.docs[key] = (Meta(partition, group, sort_key, status), doc)
        self.deleted.discard(key)
        self.dirty.add(key)

    def delete(self, key: str) -> None:
        self.docs.pop(key, None)
        self.dirty.discard(key)
        self.deleted.add(key)

    def rows(self) -> Iterator[Row]:
        for key in sorted(self.docs):
            meta, doc = self.docs[key]
            yield Row(key, meta.partition, meta.group, meta.sort_key, meta.status, encode(doc))

    def take_changes(self) -> tuple[list[Row], list[str]]:
        """Rows written and keys deleted since the last call."""
        upserts = []
        for key in sorted(self.dirty):
            meta, doc = self.docs[key]
            upserts.append(Row(key, meta.partition, meta.group, meta.sort_key, meta.status, encode(doc)))
        deletes = sorted(self.deleted)
        self.dirty = set()
        self.deleted = set()
        return upserts, deletes


class DocMemory:
    """What a runner remembers of its read models' documents between passes: one memory
    for all of them, least recently used out first, bounded by bytes.

    A document is weighed by its encoded size (read from the store, or written at the
    commit), plus ``ENTRY_BYTES`` for its key and bookkeeping. The weight is a stand-in for
    the decoded objects' memory (a few times larger), so memory stays bounded whatever the
    documents' sizes and however long the log grows.
    """

    ENTRY_BYTES = 64

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        self.names: dict[str, set[str]] = {}
        self.bytes = 0

    def of(self, name: str) -> DocCache:
        return DocCache(self, name)

    def get(self, name: str, key: str) -> tuple[Any, int]:
        entry = self.entries.get((name, key))
        if entry is None:
            return _ABSENT, 0
        self.entries.move_to_end((name, key))
        return entry

    def keep(self, name: str, docs: Mapping[str, Any], sizes: Mapping[str, int]) -> None:
        keys = self.names.setdefault(name, set())
        for key, doc in docs.items():
            size = sizes.get(key, 0) + self.ENTRY_BYTES
            old = self.entries.pop((name, key), None)
            if old is not None:
                self.bytes -= old[1]
            self.entries[(name, key)] = (doc, size)
            self.bytes += size
            keys.add(key)
        while self.bytes > self.max_bytes and self.entries:
            (gone_name, gone_key), (_, size) = self.entries.popitem(last=False)
            self.bytes -= size
            self.names[gone_name].discard(gone_key)

    def clear(self, name: str) -> None:
        for key in self.names.pop(name, ()):
            _, size = self.entries.pop((name, key))
            self.bytes -= size

    def __len__(self) -> int:
        return len(self.entries)


class DocCache:
    """One read model's part of a runner's ``DocMemory``.

    It is only trusted while this runner is the one moving the projector's position:
    the runner clears it whenever a commit fails or the position moved under it, and
    documents mutated by a batch that did not commit never survive.
    """

    def __init__(self, memory: DocMemory, name: str) -> None:
        self.memory = memory
        self.name = name

    def get(self, key: str) -> tuple[Any, int]:
        """(document, its weight), or (an absent marker, 0)."""
        return self.memory.get(self.name, key)

    def peek(self, key: str, default: Any = None) -> Any:
        """The document if remembered (``default`` if not), leaving its place in line."""
        entry = self.memory.entries.get((self.name, key))
        return default if entry is None else entry[0]

    def keep(self, docs: Mapping[str, Any], sizes: Mapping[str, int]) -> None:
        self.memory.keep(self.name, docs, sizes)

    def clear(self) -> None:
        self.memory.clear(self.name)

    def __len__(self) -> int:
        return len(self.memory.names.get(self.name, ()))


class BatchDocs:
    """Documents of one live batch: read through to the store, written back at commit."""

    def __init__(self, store: DocStore, name: str, remembered: DocCache | None = None) -> None:
        self.store = store
        self.name = name
        self.remembered = remembered
        self.cache: dict[str, Any] = {}
        self.sizes: dict[str, int] = {}  # encoded bytes, as read or as written
        self.meta: dict[str, Meta] = {}
        self.dirty: set[str] = set()
        self.deleted: set[str] = set()

    def get(self, key: str) -> dict[str, Any] | None:
        doc = self.cache.get(key, _ABSENT)
        if doc is not _ABSENT:
            return doc
        if self.remembered is not None:
            doc, size = self.remembered.get(key)
            if doc is not _ABSENT:
                self.sizes[key] = size - DocMemory.ENTRY_BYTES
        if doc is _ABSENT:
            raw = self.store.get(self.name, key)
            doc = decode(raw) if raw is not None else None
            self.sizes[key] = len(raw) if raw is not None else 0
        self.cache[key] = doc
        return doc

    def put(
        self, key: str, doc: dict[str, Any], *, partition: str = "", group: str = "", sort_key: str = "", status: str = ""
    ) -> None:
        self.cache[key] = doc
        self.meta[key] = Meta(partition, group, sort_key, status)
        self.dirty.add(key)
        self.deleted.discard(key)

    def delete(self, key: str) -> None:
        self.cache[key] = None
        self.sizes[key] = 0
        self.dirty.discard(key)
        self.deleted.add(key)

    def changes(self) -> tuple[list[Row], list[str]]:
        upserts = []
        for key in sorted(self.dirty):
            meta = self.meta[key]
            body = encode(self.cache[key])
            self.sizes[key] = len(body)
            upserts.append(Row(key, meta.partition, meta.group, meta.sort_key, meta.status, body))
        return upserts, sorted(self.deleted)
