"""The built-in connector source: access connectors kept in a local directory.

``<root>/<connector_id>/connector.json`` holds the connector's facts (strings: its
``provider``, ``provider_kind``, versions, ``required_ssot_keys`` …);
``<root>/<connector_id>/<scope>.jsonl`` holds its records, one JSON object a line, oldest
first, appended as the source learns of changes. A cursor is the number of complete lines
read; a line still being written (no newline yet) is left for the next read.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from domain.jobs.ports import ConnectorError, ConnectorRead, ConnectorRecord
from domain.shared.ids import is_valid_id

FACTS_FILE = "connector.json"


class LocalDirectoryConnectors:
    """Connectors under ``root`` (a missing root holds none)."""

    kind = "local_directory"

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def connector_ids(self) -> list[str]:
        try:
            entries = sorted(self.root.iterdir()) if self.root.is_dir() else []
        except OSError as exc:
            raise ConnectorError(f"cannot list {self.root}: {exc}", transient=True) from None
        return [e.name for e in entries if is_valid_id(e.name) and (e / FACTS_FILE).is_file()]

    def facts(self, connector_id: str) -> dict[str, str]:
        if not is_valid_id(connector_id):
            raise ConnectorError(f"{connector_id!r} is not a connector id", transient=False)
        path = self.root / connector_id / FACTS_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConnectorError(f"no connector {connector_id!r} in {self.root}", transient=False) from None
        except OSError as exc:
            raise ConnectorError(f"cannot read {path}: {exc}", transient=True) from None
        except ValueError as exc:
            raise ConnectorError(f"{path} is not JSON: {exc}", transient=False) from None
        if not isinstance(raw, dict):
            raise ConnectorError(f"{path} must hold a JSON object", transient=False)
        return {
            str(k): v if isinstance(v, str) else json.dumps(v)
            for k, v in raw.items()
            if isinstance(v, str | int | float | bool)
        }

    def read(self, connector_id: str, scope: str, after: str) -> ConnectorRead:
        self.facts(connector_id)  # an unknown connector is an error, an empty scope is not
        if not is_valid_id(scope):
            raise ConnectorError(f"{scope!r} is not a scope", transient=False)
        start = int(after) if after.isdigit() else 0
        if after and not after.isdigit():
            raise ConnectorError(f"cursor {after!r} was not given by this source", transient=False)
        path = self.root / connector_id / f"{scope}.jsonl"
        try:
            content = path.read_bytes() if path.exists() else b""
        except OSError as exc:
            raise ConnectorError(f"cannot read {path}: {exc}", transient=True) from None
        lines = content.split(b"\n")[:-1]  # complete lines only
        if start > len(lines):
            raise ConnectorError(
                f"cursor {start} is beyond the {len(lines)} lines of {path.name}; reconcile to start over",
                transient=False,
            )
        records, rejected = [], []
        for number, line in enumerate(lines[start:], start + 1):
            if not line.strip():
                continue
            try:
                records.append(msgspec.json.decode(line, type=ConnectorRecord))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                rejected.append(f"{path.name} line {number}: {exc}")
        return ConnectorRead(records=records, cursor=str(len(lines)), rejected=rejected)
