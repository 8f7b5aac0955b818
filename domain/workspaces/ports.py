"""The workspace provider port: what the controller asks of a cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import msgspec


class VolumeClaim(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    size: str
    storage_class: str
    access_mode: str
    retain: bool = False  # user home survives stops; scratch belongs to one pod


class WorkspaceSpec(msgspec.Struct, frozen=True, kw_only=True):
    scope: str
    namespace: str
    generation: int  # the same for every controller that provisions this lease
    volumes: list[VolumeClaim]
    env: dict[str, str]


class Pod(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    scope: str
    pvc: str
    created_at: str
    ready: bool


class ProvisionRefused(Exception):
    """The cluster will not run this workspace (e.g. a scratch claim off the contract)."""


class WorkspaceProvider(Protocol):
    def up(self, spec: WorkspaceSpec, now: str) -> Pod:
        """Creates (or finds) the pod of this generation; ``ready`` once it has started."""

    def pods(self, namespace: str, scope: str) -> list[Pod]:
        """The workspace's pods, oldest first."""

    def remove(self, namespace: str, pod_name: str) -> None:
        """Deletes a pod and its scratch claim."""

    def stop(self, namespace: str, scope: str) -> list[str]:
        """Deletes every pod of the workspace (user home kept); answers the pods removed."""


# -- the model proxy's upstreams -------------------------------------------------------------


class UpstreamAnswer(Protocol):
    """An upstream's answer as it arrives: its status, the headers worth relaying, and its
    body chunk by chunk (raising when the connection is cut before the end)."""

    status: int
    headers: list[tuple[str, str]]

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def close(self) -> None: ...


class ModelUpstream(Protocol):
    """One model API root (Anthropic's, OpenAI's, or the built-in model)."""

    name: str

    async def open(self, path: str, query: str, headers: list[tuple[str, str]], body: bytes) -> UpstreamAnswer:
        """Sends the request (``path`` below the API root); raises ``Unavailable``
        (``model_proxy_unavailable``) when the upstream cannot be reached."""
        ...
