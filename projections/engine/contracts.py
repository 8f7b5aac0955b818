"""Every area's event contracts in one table: stored kind -> its declared Struct.

The engine decodes each stored event once, straight from its JSON into the Struct of its
kind (``projections.engine.envelope``). A kind no area declares stays untyped; projectors
ignore it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from domain.gate.events import BY_KIND as GATE
from domain.jobs.events import BY_KIND as JOBS
from domain.portal.events import BY_KIND as PORTAL
from domain.projects import events as project_events
from domain.projects.events import BY_KIND as PROJECTS
from domain.studio.events import BY_KIND as STUDIO
from domain.workspaces.events import EVENTS as WORKSPACES
from domain.workspaces.events import USAGE_EVENTS

CONTRACTS: dict[str, type[msgspec.Struct]] = {
    **STUDIO,
    **PROJECTS,
    **PORTAL,
    **JOBS,
    **GATE,
    **{f"DevWorkspace.{name}": struct for name, struct in WORKSPACES.items()},
    **USAGE_EVENTS,
}


# Kinds whose older versions are still stored: the stored form also reads the older
# version's fields and the library's ``class_version`` (absent: version 1), and the
# upcaster turns an older state into the current contract's.
UPCASTERS: dict[str, tuple[int, tuple[str, ...], Callable[[dict[str, Any]], None]]] = {
    "Project.Created": (2, ("request",), project_events.upcast_v1),  # the raw request mapping
}


def stored_form(kind: str, contract: type[msgspec.Struct]) -> type[msgspec.Struct]:
    """The contract plus the library's ``timestamp``, so one decode reads both; still an
    instance of the contract, so projectors match on the contract's type."""
    config = contract.__struct_config__
    extra: list[tuple[str, Any, Any]] = [("timestamp", Any, None)]
    if kind in UPCASTERS:
        extra += [("class_version", int, 1), *((name, dict[str, Any] | None, None) for name in UPCASTERS[kind][1])]
    return msgspec.defstruct(
        f"Stored{contract.__name__}",
        extra,
        bases=(contract,),
        frozen=config.frozen,
        kw_only=True,
        module=contract.__module__,
    )


STORED: dict[str, type[msgspec.Struct]] = {kind: stored_form(kind, c) for kind, c in CONTRACTS.items()}
DECODERS: dict[str, msgspec.json.Decoder[Any]] = {kind: msgspec.json.Decoder(s) for kind, s in STORED.items()}


def upcast(kind: str, event: Any) -> Any:
    """An event of an older version read as the current contract (others as they are)."""
    current, _, upcaster = UPCASTERS[kind]
    if event.class_version >= current:
        return event
    state = msgspec.structs.asdict(event)
    upcaster(state)
    state["class_version"] = current
    return msgspec.convert(state, STORED[kind], strict=False)
