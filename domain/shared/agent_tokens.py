"""Agent tokens: which agent session calls the squad's MCP server (an HMAC over its ids).

The execution plane hands each agent process a token naming its tenant, run, session and
agent; the MCP endpoint trusts the ids only when the signature verifies with the same key.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from domain.shared.ids import is_valid_id

VERSION = "sqa1"


@dataclass(frozen=True)
class AgentIdentity:
    tenant: str
    run_id: str
    session_id: str
    agent_id: str


def _signature(key: str, body: str) -> str:
    return hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()[:40]


def sign(key: str, identity: AgentIdentity) -> str:
    if not key:
        raise ValueError("an agent token needs a signing key")
    body = ".".join((VERSION, identity.tenant, identity.run_id, identity.session_id, identity.agent_id))
    return f"{body}.{_signature(key, body)}"


def verify(key: str, token: str) -> AgentIdentity | None:
    """The identity a token names, or None when it is malformed or its signature is wrong."""
    parts = token.split(".")
    if not key or len(parts) != 6 or parts[0] != VERSION or not all(is_valid_id(p) for p in parts[1:5]):
        return None
    body = ".".join(parts[:5])
    if not hmac.compare_digest(_signature(key, body), parts[5]):
        return None
    return AgentIdentity(*parts[1:5])
