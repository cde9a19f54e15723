"""Where a run's listening sockets bind: the interface the launcher named, never all of them.

torch's TCPStore server, given only a port, listens on every interface (``*:PORT``), though the
launcher named one address (MASTER_ADDR, often 127.0.0.1): anyone on any network the host is
on could then reach the run's store, which has no authentication. asrdist's own listeners (the
run's store, an elastic run's store process, diloco-async's outer-state server) instead bind
:func:`bind_address`: ``--bind``'s address if given, else MASTER_ADDR's, resolved here. The
store gets a socket bound here (:func:`listening_socket`) through TCPStore's
``master_listen_fd``, so it listens nowhere else.

gloo (and NCCL) listen too, on an address of their own choosing (the hostname's, or
``GLOO_SOCKET_IFNAME``'s / ``NCCL_SOCKET_IFNAME``'s interface); where the named address is a
loopback one every learner is on this host, so :func:`pin_collectives` keeps them on the
loopback interface (unless those variables are set already).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import MutableMapping

from asrdist.errors import AsrdistError

LOOPBACK_IFNAME = "lo"  # Linux's loopback interface
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def _literal(addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(addr.strip("[]"))
    except ValueError:
        return None


def bind_address(named: str, given: str = "", all_here: bool = False) -> str:
    """The address to listen on for a run whose store the launcher named ``named`` (MASTER_ADDR
    or the Slurm node list's first host); ``given``: ``--bind``'s, which wins. A host name is
    resolved here (to its IPv4 address where it has one); one that resolves to a loopback
    address though it names this host for the others (Debian's ``127.0.1.1 hostname``) would
    make the run unreachable from other hosts, so it is refused unless ``all_here`` (every
    learner is on this host)."""
    choice = given or named
    literal = _literal(choice)
    if literal is not None:
        return str(literal)
    try:
        infos = socket.getaddrinfo(choice, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        what = "--bind" if given else "MASTER_ADDR"
        raise AsrdistError(f"{what} {choice}: cannot resolve it here ({exc.strerror})") from None
    # IPv4 first: the learners' clients (multiprocessing's among them) reach a name over IPv4
    found = str(min(infos, key=lambda info: info[0] != socket.AF_INET)[4][0])
    if ipaddress.ip_address(found).is_loopback and choice not in LOOPBACK_NAMES \
            and not all_here and not given:
        raise AsrdistError(f"MASTER_ADDR {choice} resolves to {found} (loopback) on this host, "
                           "which the other hosts cannot reach: give --bind ADDRESS, this "
                           "host's address on the learners' network")
    return found


def listening_socket(addr: str, port: int) -> socket.socket:
    """A TCP socket bound to ``addr:port`` and listening (``SO_REUSEADDR``, as torch's own)."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addr, port))
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise AsrdistError(f"cannot listen on {addr}:{port}: {exc.strerror}") from None
    return sock


def pin_collectives(addr: str, env: MutableMapping[str, str] = os.environ) -> None:
    """Keep gloo's and NCCL's sockets on the loopback interface when the run's address is a
    loopback one (all learners on this host); a choice already made in ``env`` is kept."""
    literal = _literal(addr)
    if addr not in LOOPBACK_NAMES and (literal is None or not literal.is_loopback):
        return
    if LOOPBACK_IFNAME not in (name for _, name in socket.if_nameindex()):
        return
    env.setdefault("GLOO_SOCKET_IFNAME", LOOPBACK_IFNAME)
    env.setdefault("NCCL_SOCKET_IFNAME", LOOPBACK_IFNAME)
