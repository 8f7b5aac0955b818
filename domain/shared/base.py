"""Aggregate base classes with string ids, so ids can carry tenant and run scope."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from datetime import datetime
from typing import Any

from eventsourcing.domain import TZINFO as UTC
from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    CommandMethodDecorator,
    MetaDomainEvent,
    decorated_func_callers,
)
from eventsourcing.utils import register_topic


class DomainEvent(metaclass=MetaDomainEvent):
    """A fact in the past tense; its fields are primitives so projectors read it raw."""

    originator_id: str
    originator_version: int
    timestamp: datetime


class Aggregate(BaseAggregate[str]):
    """Base for every squadops aggregate: string id, frozen dataclass events."""

    class Event(DomainEvent, CanMutateAggregate[str]):
        pass

    class Created(Event, CanInitAggregate[str]):
        originator_topic: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if isinstance(value, CommandMethodDecorator):
                method = lean_event_method(value)
                if method is not None:
                    setattr(cls, name, method)


_LIBRARY_FIELDS = ("originator_id", "originator_version", "timestamp")


def lean_event_method(decorator: CommandMethodDecorator) -> Any:
    """An ``@event`` method that triggers its event the library's way with less work.

    The library's decorator binds a new object on every attribute access, turns the call
    into keyword arguments and filters them by signature twice, checks the event's topic
    and goes through ``trigger_event``, ``mutate`` and ``apply``: tens of µs a call, and a
    ticker pass triggers thousands. This plain method does the same in one call: the event
    class the library defined for the method, holding the call's arguments (the method's
    defaults filled in) as the aggregate's next event, with the same fields in the same
    order; then the method's body applied with them; then the aggregate's version, time
    and pending event. Replaying a stored event still goes through the library's
    ``apply``, so both meet the same body. None (keep the library's) for anything but a
    plain method whose parameters are exactly its event's fields.
    """
    func = decorator.decorated_func
    if decorator.decorated_property is not None or func.__name__ in ("__init__", "_"):
        return None
    event_cls = decorated_func_callers.get(decorator)
    if event_cls is None:
        return None
    fields = tuple(f.name for f in dataclasses.fields(event_cls))  # type: ignore[arg-type]
    params = list(inspect.signature(func).parameters.values())[1:]
    names = fields[len(_LIBRARY_FIELDS):]
    if (
        fields[: len(_LIBRARY_FIELDS)] != _LIBRARY_FIELDS
        or sorted(names) != sorted(p.name for p in params)
        or any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        or hasattr(event_cls, "__post_init__")
    ):
        return None
    if any(p.name.startswith("_lean_") for p in params):
        return None  # (the generated method's own names start so)
    # The method is written out for its own parameters (as ``dataclasses`` writes an
    # ``__init__``): Python binds the call, fills the defaults and refuses a bad call
    # before anything changes, and the event's fields are filled in their order.
    signature, keyword_only, namespace = ["_lean_self"], False, {}
    for p in params:
        if p.kind is p.KEYWORD_ONLY and not keyword_only:
            signature.append("*")
            keyword_only = True
        if p.default is p.empty:
            signature.append(p.name)
        else:
            namespace[f"_lean_default_{p.name}"] = p.default
            signature.append(f"{p.name}=_lean_default_{p.name}")
    fill = "".join(f", {name!r}: {name}" for name in names)
    call = ", ".join(f"{p.name}={p.name}" for p in params)
    source = (
        f"def {func.__name__}({', '.join(signature)}):\n"
        "    _lean_version = _lean_self._version + 1\n"
        "    _lean_timestamp = _lean_now(tz=_lean_utc)\n"
        "    _lean_event = _lean_new(_lean_event_cls)\n"
        "    _lean_event.__dict__.update({'originator_id': _lean_self._id, 'originator_version': _lean_version, "
        f"'timestamp': _lean_timestamp{fill}}})\n"
        f"    _lean_func(_lean_self{', ' if call else ''}{call})\n"
        "    _lean_self._version = _lean_version\n"
        "    _lean_self._modified_on = _lean_timestamp\n"
        "    _lean_self._pending_events.append(_lean_event)\n"
    )
    namespace.update(
        _lean_now=datetime.now, _lean_utc=UTC, _lean_new=object.__new__, _lean_event_cls=event_cls, _lean_func=func
    )
    exec(source, namespace)  # noqa: S102  (source made above from the method's own signature)
    trigger = namespace[func.__name__]

    functools.update_wrapper(trigger, func)
    trigger.event_decorator = decorator  # type: ignore[attr-defined]  # the library's path, for tests
    return trigger


def keep_stored_topics(aggregate: type[Aggregate], module: str) -> None:
    """Writes and reads ``aggregate``'s events under the topics of ``module``.

    Stored events live forever and name their class by topic (``domain.run:Run.Launched``),
    and the aggregate's own topic is stored inside its created event. When a module moves,
    its aggregates keep the topics the log already holds, so an existing database reads the
    same and new events are written byte for byte as before.
    """
    classes = [aggregate] + [
        value for value in vars(aggregate).values() if isinstance(value, type) and issubclass(value, Aggregate.Event)
    ]
    for cls in classes:
        topic = f"{module}:{cls.__qualname__}"
        cls.TOPIC = topic  # type: ignore[attr-defined]
        register_topic(topic, cls)
