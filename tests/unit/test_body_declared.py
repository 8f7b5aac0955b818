"""The strict body check finds each handler's declared type, and only that handler's:
the memory of declared types never outlives a handler (a collected handler's id can be
reused by another app's handler, which would then be checked against the wrong type)."""


import gc
import weakref

import msgspec
from litestar import Litestar, post

from api import body


class Pause(msgspec.Struct):
    verb: str


class Copilot(msgspec.Struct):
    action_id: str


def handler_for(kind: type) -> object:
    @post("/x", sync_to_thread=False)
    def accept(data: kind) -> None:  # type: ignore[valid-type]  (a real class: no string annotations here)
        return None

    Litestar([accept])  # a handler is resolved (its signature parsed) by its app
    return accept


def test_each_handler_is_checked_against_its_own_type_and_forgotten_with_it() -> None:
    gc.collect()  # handlers earlier tests left for the collector are not counted here
    before = len(body._DECLARED)
    first = handler_for(Copilot)
    assert body._declared_body(first) is Copilot
    second = handler_for(Pause)
    assert body._declared_body(second) is Pause
    assert body._declared_body(first) is Copilot
    assert first in body._DECLARED and second in body._DECLARED
    handlers = [weakref.ref(first), weakref.ref(second)]
    del first, second
    gc.collect()
    assert all(handler() is None for handler in handlers)
    assert len(body._DECLARED) <= before
