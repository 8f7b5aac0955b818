"""The built-in power device: UDP datagrams to ``SQUADOPS_POWER_DEVICE_ADDR``.

- wake: a wake-on-LAN magic packet (six 0xFF bytes, then the MAC sixteen times);
- sleep: the text command ``squadops-power/1 sleep node=<name> mac=<mac> device=<id>``;
- state: ``squadops-power/1 state node=<name> mac=<mac> nonce=<n>``, answered by the
  device with ``squadops-power/1 state node=<name> state=<awake|asleep> nonce=<n>``;
  no answer within the timeout is ``unknown``.
"""

from __future__ import annotations

import secrets
import socket
import time

from domain.jobs.policies import magic_packet
from domain.jobs.ports import PowerDeviceError, PowerTarget

PROTOCOL = "squadops-power/1"


def parse_addr(addr: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as a socket address."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"power device address must be host:port, got {addr!r}")
    return host.strip("[]"), int(port)


class UdpPowerDevice:
    """Sends wake, sleep and state datagrams to one power device."""

    def __init__(self, addr: str, *, timeout: float = 2.0) -> None:
        self.host, self.port = parse_addr(addr)
        self.timeout = timeout

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def _socket(self) -> socket.socket:
        try:
            family, kind, proto, _, target = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_DGRAM)[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise PowerDeviceError(f"{self.addr}: {exc}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)  # WOL is often broadcast
            sock.connect(target)
        except OSError as exc:
            sock.close()
            raise PowerDeviceError(f"{self.addr}: {exc}") from None
        return sock

    def _send(self, packet: bytes) -> None:
        with self._socket() as sock:
            try:
                sock.send(packet)
            except OSError as exc:
                raise PowerDeviceError(f"{self.addr}: {exc}") from None

    def wake(self, target: PowerTarget) -> dict[str, str]:
        try:
            packet = magic_packet(target.mac_address)
        except ValueError as exc:
            raise PowerDeviceError(str(exc)) from None
        self._send(packet)
        return {"kind": "wake_on_lan", "to": self.addr, "bytes": str(len(packet)), "mac_address": target.mac_address}

    def sleep(self, target: PowerTarget) -> dict[str, str]:
        command = f"{PROTOCOL} sleep node={target.node_name} mac={target.mac_address} device={target.power_device_id}"
        self._send(command.encode())
        return {"kind": "sleep_command", "to": self.addr, "command": command}

    def state(self, target: PowerTarget) -> str:
        nonce = secrets.token_hex(6)
        query = f"{PROTOCOL} state node={target.node_name} mac={target.mac_address} nonce={nonce}"
        deadline = time.monotonic() + self.timeout
        with self._socket() as sock:
            try:
                sock.send(query.encode())
                while (left := deadline - time.monotonic()) > 0:
                    sock.settimeout(left)
                    fields = dict(
                        part.split("=", 1) for part in sock.recv(2048).decode(errors="replace").split()[2:] if "=" in part
                    )
                    if fields.get("nonce") == nonce and fields.get("node") == target.node_name:
                        state = fields.get("state", "")
                        return state if state in ("awake", "asleep") else "unknown"
            except TimeoutError:
                return "unknown"
            except OSError as exc:  # e.g. ICMP port unreachable: nothing listens there
                raise PowerDeviceError(f"{self.addr}: {exc}") from None
        return "unknown"
