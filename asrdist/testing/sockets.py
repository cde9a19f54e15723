"""The TCP sockets a process listens on, read from /proc (as ``ss -ltnp`` shows them), for the
checks that a run listens on the interface its launcher named alone."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct

LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp


def _address(hex_addr: str) -> str:
    """``0100007F`` -> ``127.0.0.1`` (the kernel's bytes, in host order per 32-bit word)."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(struct.pack("=I", int.from_bytes(raw[i:i + 4], "big"))
                     for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words if len(words) == 16 else socket.inet_ntoa(words)))


def listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket process ``pid`` holds in the LISTEN state."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                addr, port = fields[1].split(":")
                found.add((_address(addr), int(port, 16)))
    return found
