"""Every area's event contracts in one table: stored kind -> its declared Struct.

The engine decodes each stored event once, straight from its JSON into the Struct of its
kind (``projections.engine.envelope``). A kind no area declares stays untyped; projectors
ignore it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.gate.events import BY_KIND as GATE
from domain.jobs.events import BY_KIND as JOBS
from domain.portal.events import BY_KIND as PORTAL
from domain.projects.events import BY_KIND as PROJECTS
from domain.studio.events import BY_KIND as STUDIO
from domain.workspaces.events import EVENTS as WORKSPACES

CONTRACTS: dict[str, type[msgspec.Struct]] = {
    **STUDIO,
    **PROJECTS,
    **PORTAL,
    **JOBS,
    **GATE,
    **{f"DevWorkspace.{name}": struct for name, struct in WORKSPACES.items()},
}


def stored_form(contract: type[msgspec.Struct]) -> type[msgspec.Struct]:
    """The contract plus the library's ``timestamp``, so one decode reads both; still an
    instance of the contract, so projectors match on the contract's type."""
    config = contract.__struct_config__
    return msgspec.defstruct(
        f"Stored{contract.__name__}",
        [("timestamp", Any, None)],
        bases=(contract,),
        frozen=config.frozen,
        kw_only=True,
        module=contract.__module__,
    )


STORED: dict[str, type[msgspec.Struct]] = {kind: stored_form(c) for kind, c in CONTRACTS.items()}
DECODERS: dict[str, msgspec.json.Decoder[Any]] = {kind: msgspec.json.Decoder(s) for kind, s in STORED.items()}
