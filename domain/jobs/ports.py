"""Ports of the jobs area: the access connectors and the power device.

The built-in adapters live in ``workers/adapters``: a connector source reading a local
directory, and a power device spoken to over UDP.
"""

from __future__ import annotations

from typing import Protocol

import msgspec


class ConnectorRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One access fact of a connector: a subject's account at a provider (or its removal)."""

    subject_key: str = ""
    provider: str = ""
    linked: bool = True
    user_id: str = ""
    username: str = ""
    email: str = ""
    provider_user_id: str = ""
    provider_username: str = ""
    attributes: dict[str, str] = {}


class ConnectorRead(msgspec.Struct, kw_only=True, frozen=True):
    """Records after a cursor, the cursor after them, and records that did not parse."""

    records: list[ConnectorRecord]
    cursor: str
    rejected: list[str] = []


class ConnectorError(Exception):
    """The connector source could not answer; ``transient`` failures are worth a retry."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


class Connectors(Protocol):
    """Access connectors: each has facts (its single source of truth) and records by scope."""

    kind: str

    def connector_ids(self) -> list[str]:
        """The connectors the source holds, sorted."""
        ...

    def facts(self, connector_id: str) -> dict[str, str]:
        """What the connector says of itself (provider, kind, versions, required keys)."""
        ...

    def read(self, connector_id: str, scope: str, after: str) -> ConnectorRead:
        """Records of ``scope`` after cursor ``after`` ("" = from the start)."""
        ...


class PowerTarget(msgspec.Struct, kw_only=True, frozen=True):
    node_name: str
    mac_address: str
    power_device_id: str = ""


class PowerDeviceError(Exception):
    """The power device could not be reached or did not answer."""


class PowerDevice(Protocol):
    """Wakes and sleeps nodes, and reports their power state."""

    def wake(self, target: PowerTarget) -> dict[str, str]:
        """Sends a wake-on-LAN magic packet for the target's MAC; answers what was sent."""
        ...

    def sleep(self, target: PowerTarget) -> dict[str, str]:
        """Sends the sleep command for the target; answers what was sent."""
        ...

    def state(self, target: PowerTarget) -> str:
        """``awake``, ``asleep`` or ``unknown`` (no answer)."""
        ...
