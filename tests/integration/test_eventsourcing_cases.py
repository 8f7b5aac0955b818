"""The eventsourcing library's own recorder and transcoder test cases, run against ours.

The cases ship in the library's wheel (``eventsourcing/tests/persistence.py``). They run
here against what ``workers.bootstrap`` configures: the typed-array PostgreSQL recorder
(``workers.eventstore.recorder``), the library's SQLite recorder with our settings, and the
msgspec transcoder (``workers.eventstore.transcoder``).

Deliberate refusals: the transcoder stores event payloads that read back unchanged and
nothing else, so these library cases are overridden, each by a test of the refusal:

1. A top level that is not a mapping (``test_str``, ``test_list``, ``test_tuple``,
   ``test_mixed``, ``test_list_subclass``, ``test_str_subclass``, ``test_int_subclass``):
   refused. The mapper always hands over an event's attributes as a dict; a bare value
   at the top is a bug. String escapes and nested lists are checked inside a mapping,
   with the library's exact bytes.
2. Tuples, at any depth (``test_tuple``, ``test_mixed``): refused. JSON has no tuple and
   the library needs a registered transcoding to bring one back; ours would read back a
   list.
3. Subclasses of JSON types, nested (``test_dict_subclass``, ``test_list_subclass``,
   ``test_str_subclass``, ``test_int_subclass``): refused; they read back as the base
   type. A dict subclass at the top is accepted as its items: the top level is the
   event's attribute dict, never a value of its own.
4. Custom types, and datetime/UUID/Decimal values in payloads (``test_custom_type_in_dict``,
   ``test_nested_custom_type``, ``test_custom_type_error``): refused when written (a
   :class:`~projections.transcoder.EventPayloadError`, a ``TypeError`` like the library's),
   because projectors read the stored JSON directly. Typed forms the library wrote are
   read back as the library reads them; one it would not know raises its error.
5. NaN and ±Infinity (no library case; see tests/unit/test_transcoder.py): refused when
   written, read back when the library wrote them.

Recorder differences, by configuration rather than refusal:

- Originator ids are text (``ORIGINATOR_ID_TYPE=text``), so the cases' ids are strings.
- The library's SQLite recorder has no push subscription (``subscribe`` is not
  implemented), so the subscription case runs on PostgreSQL only.
- ``AggregateRecorderTestCase`` is not run: ours are application recorders, which answer
  an insert with its notification ids where that case expects ``None``.

The library's throughput and timing cases (``test_performance``, ``test_concurrent_throughput``:
they time inserts and print a rate, asserting only that nothing failed) run in ``make bench``
(bench/bench_eventsourcing.py), on the same recorders; every correctness case runs here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from eventsourcing.persistence import (
    ApplicationRecorder,
    InfrastructureFactory,
    TranscodingNotRegisteredError,
)
from eventsourcing.sqlite import SQLiteApplicationRecorder
from eventsourcing.tests import persistence as library
from eventsourcing.utils import Environment

from domain.shared.event_store import EventStore
from tests import infra
from workers.bootstrap import eventsourcing_env
from workers.eventstore.recorder import TypedArrayApplicationRecorder
from workers.eventstore.transcoder import EventPayloadError, MsgspecTranscoder
from workers.settings import Settings

# -- recorders ------------------------------------------------------------------------------


class _OurRecorder:
    """Builds the recorder the service would build for ``self.database_url``."""

    database_url: str
    expected_recorder: type[ApplicationRecorder]
    # Timing cases: `make bench` runs them (bench/bench_eventsourcing.py). unittest collects
    # only callable test attributes, so these are not collected here.
    test_performance = None
    test_concurrent_throughput = None

    def new_originator_id(self) -> UUID | str:
        return str(uuid4())

    def create_recorder(self) -> Any:
        env = Environment(EventStore.name, eventsourcing_env(Settings(database_url=self.database_url)))
        factory = InfrastructureFactory.construct(env)
        self.addCleanup(factory.close)  # type: ignore[attr-defined]
        recorder = factory.application_recorder()
        assert type(recorder) is self.expected_recorder
        # The library's interleaving case tells its reader threads to stop but does not
        # join them: closing the recorder under a reader still inside SQLite crashes the
        # interpreter. Cleanups run last-added first, so those threads end before the close.
        running = set(threading.enumerate())
        self.addCleanup(_join_threads_started_since, running)  # type: ignore[attr-defined]
        return recorder


def _join_threads_started_since(running: set[threading.Thread]) -> None:
    for thread in threading.enumerate():
        if thread not in running and not thread.daemon and thread is not threading.current_thread():
            thread.join(timeout=30)


class _OnPostgres(_OurRecorder):
    expected_recorder = TypedArrayApplicationRecorder

    @pytest.fixture(autouse=True)
    def _database(self, pg_admin_url: str) -> Iterator[None]:
        with infra.fresh_database(pg_admin_url) as url:
            self.database_url = url
            yield
            self.doCleanups()  # type: ignore[attr-defined]  # close pools before the drop


class _OnSqlite(_OurRecorder):
    expected_recorder = SQLiteApplicationRecorder

    @pytest.fixture(autouse=True)
    def _database(self, tmp_path: Path) -> None:
        self.database_url = f"sqlite:///{tmp_path / 'events.db'}"


@pytest.mark.pg
class TestPostgresApplicationRecorder(_OnPostgres, library.ApplicationRecorderTestCase):
    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


@pytest.mark.pg
class TestPostgresNotificationIdsDoNotInterleave(_OnPostgres, library.NonInterleavingNotificationIDsBaseCase):
    pass


class TestSqliteApplicationRecorder(_OnSqlite, library.ApplicationRecorderTestCase):
    pass


class TestSqliteNotificationIdsDoNotInterleave(_OnSqlite, library.NonInterleavingNotificationIDsBaseCase):
    pass


# -- the transcoder ------------------------------------------------------------------------


class TestMsgspecTranscoder(library.TranscoderTestCase):
    def construct_transcoder(self) -> MsgspecTranscoder:
        return MsgspecTranscoder()

    def refuses(self, obj: object, reason: str = "") -> None:
        with self.assertRaises(EventPayloadError) as refused:
            self.transcoder.encode(obj)
        self.assertIn(reason, str(refused.exception))
        self.assertIsInstance(refused.exception, TypeError)

    def same_as_library(self, obj: dict[str, Any], expected: bytes) -> None:
        data = self.transcoder.encode(obj)
        self.assertEqual(data, expected)
        self.assertEqual(obj, self.transcoder.decode(data))

    # Refusal 1: the library's string cases, inside a mapping.
    def test_str(self) -> None:
        self.refuses("a", "must be a mapping")
        self.same_as_library({"s": "a"}, b'{"s":"a"}')
        self.same_as_library({"s": "a'b"}, b'''{"s":"a'b"}''')
        self.same_as_library({"s": 'a"b'}, b'{"s":"a\\"b"}')
        self.same_as_library({"s": "🐈 哈哈"}, b'{"s":"\xf0\x9f\x90\x88 \xe5\x93\x88\xe5\x93\x88"}')
        legacy_ascii = b'{"s":"\\ud83d\\udc08 \\u54c8\\u54c8"}'
        self.assertEqual({"s": "🐈 哈哈"}, self.transcoder.decode(legacy_ascii))

    # Refusal 1: the library's list cases, inside a mapping.
    def test_list(self) -> None:
        self.refuses([], "must be a mapping")
        for obj in ([], [[]], [[1, 2]], [["a", "b"]], [[1, "a"]]):
            self.same_as_library({"l": obj}, b'{"l":' + repr(obj).replace(" ", "").replace("'", '"').encode() + b"}")

    # Refusals 1 and 2.
    def test_tuple(self) -> None:
        self.refuses((), "must be a mapping")
        for obj in ((), ((),), ((1, 2),), (("a", "b"),), ((1, "a"),)):
            self.refuses({"t": obj}, "tuple is not a JSON value")
        self.refuses({"l": [(1, 2)]}, "['l'][0]")

    # Refusals 1 and 2; the mapping-of-lists case is kept.
    def test_mixed(self) -> None:
        self.refuses([(1, "a"), {"b": 2}], "must be a mapping")
        self.refuses(([1, "a"], {"b": 2}), "must be a mapping")
        self.refuses({"a": (1, 2), "b": [3, 4]}, "['a']")
        self.same_as_library({"a": [1, 2], "b": [3, {"c": 4}]}, b'{"a":[1,2],"b":[3,{"c":4}]}')

    # Refusal 3.
    def test_dict_subclass(self) -> None:
        self.refuses({"d": library.Mydict({"a": 1})}, "subclass")
        data = self.transcoder.encode(library.Mydict({"a": 1}))
        self.assertEqual(data, b'{"a":1}')
        self.assertEqual(self.transcoder.decode(data), {"a": 1})

    def test_list_subclass(self) -> None:
        self.refuses(library.MyList((("a", 1),)), "must be a mapping")
        self.refuses({"l": library.MyList(["a", 1])}, "subclass")

    def test_str_subclass(self) -> None:
        self.refuses(library.MyStr("a"), "must be a mapping")
        self.refuses({"s": library.MyStr("a")}, "subclass")

    def test_int_subclass(self) -> None:
        self.refuses(library.MyInt(3), "must be a mapping")
        self.refuses({"i": library.MyInt(3)}, "subclass")

    # Refusal 4.
    def test_custom_type_in_dict(self) -> None:
        value = library.CustomType2(library.CustomType1(UUID("b2723fe2c01a40d2875ea3aac6a09ff5")))
        self.refuses({"a": value}, "CustomType2 is not a JSON value")
        self.refuses({"a": value.value.value}, "UUID is not a JSON value")

    def test_nested_custom_type(self) -> None:
        self.refuses(library.CustomType2(library.CustomType1(uuid4())), "must be a mapping")
        written_by_library = (
            b'{"a":{"_type_":"custom_type2_as_dict","_data_":'
            b'{"_type_":"custom_type1_as_dict","_data_":'
            b'{"_type_":"uuid_hex","_data_":"b2723fe2c01a40d2875ea3aac6a09ff5"}}}}'
        )
        with self.assertRaises(TranscodingNotRegisteredError):
            self.transcoder.decode(written_by_library)
        uuid_only = b'{"a":{"_type_":"uuid_hex","_data_":"b2723fe2c01a40d2875ea3aac6a09ff5"}}'
        self.assertEqual({"a": UUID("b2723fe2c01a40d2875ea3aac6a09ff5")}, self.transcoder.decode(uuid_only))

    def test_custom_type_error(self) -> None:
        self.refuses(library.MyClass(), "must be a mapping")
        self.refuses({"a": library.MyClass()}, "MyClass is not a JSON value")
        with self.assertRaises(TypeError) as cm:
            self.transcoder.decode(b'{"a":{"_type_":"custom_type3_as_dict","_data_":""}}')
        self.assertEqual(
            cm.exception.args[0],
            "Data serialized with name 'custom_type3_as_dict' is not "
            "deserializable. Please register a custom transcoding for this type.",
        )
