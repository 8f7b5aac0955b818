"""The outer half of the sandbox's network: one Unix socket per allowed address per agent.

A sandboxed agent has a network namespace of its own (loopback only). For each address it
may reach (the service's MCP endpoint, the model endpoint), the plane listens on a Unix
socket in a private folder, which bwrap binds into the sandbox; ``socat`` inside carries the
agent's loopback connections to it, and this forwarder carries each one on to the real TCP
address. Nothing else leaves the sandbox.

All forwarding runs on one asyncio loop in a daemon thread of the plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import structlog

from workers.planes.local.sandbox import Endpoint

log = structlog.get_logger("squadops.local_plane")
CHUNK = 65536
OPEN_TIMEOUT = 10.0


class Forwarder:
    """Listens on Unix sockets and connects each accepted stream to its TCP address."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: dict[Path, list[asyncio.AbstractServer]] = {}
        self._connections: dict[Path, set[asyncio.StreamWriter]] = {}  # open ends (touched on the loop only)
        self._lock = threading.Lock()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="sandbox-forwarder", daemon=True).start()
                self._loop = loop
            return self._loop

    @staticmethod
    def folder() -> Path:
        """A new private folder for one launch's sockets (short: Unix socket paths are bounded)."""
        return Path(tempfile.mkdtemp(prefix="squadops-net-"))

    def open(self, folder: Path, points: Sequence[Endpoint]) -> None:
        """Listens on ``<folder>/<index>.sock`` for each endpoint (ready when this returns)."""
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(self._open(folder, points), loop)
        self._servers[folder] = future.result(OPEN_TIMEOUT)

    async def _open(self, folder: Path, points: Sequence[Endpoint]) -> list[asyncio.AbstractServer]:
        servers = []
        for index, point in enumerate(points):
            path = folder / f"{index}.sock"

            async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, to: Endpoint = point) -> None:
                await self._carry(reader, writer, to, self._connections.setdefault(folder, set()))

            servers.append(await asyncio.start_unix_server(accepted, path=str(path)))
            path.chmod(0o600)
        return servers

    @staticmethod
    async def _carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, to: Endpoint,
                     open_ends: set[asyncio.StreamWriter]) -> None:
        """One connection: the agent's half-close is passed on; once the address has answered
        all it will (or the launch is closed under it), both ends are closed."""
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(to.host, to.port)
        except OSError as exc:
            log.warning("sandbox_forward_failed", address=to.address, error=repr(exc))
            writer.close()
            return
        ends = (writer, upstream_writer)
        open_ends.update(ends)
        outbound = asyncio.ensure_future(_pump(reader, upstream_writer))
        try:
            await _pump(upstream_reader, writer)
        finally:
            outbound.cancel()
            for end in ends:
                end.close()
                open_ends.discard(end)

    def close(self, folder: Path | None) -> None:
        """Stops listening for one launch and removes its folder."""
        if folder is None:
            return
        servers = self._servers.pop(folder, [])
        if servers and self._loop is not None:
            async def shut() -> None:
                for server in servers:
                    server.close()
                for end in self._connections.pop(folder, set()):  # what the process left open
                    end.close()

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(shut(), self._loop).result(OPEN_TIMEOUT)
        shutil.rmtree(folder, ignore_errors=True)

    def close_all(self) -> None:
        for folder in list(self._servers):
            self.close(folder)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copies until end of stream, then half-closes the other side."""
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        writer.close()
