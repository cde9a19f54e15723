"""Control messages through the store, signed with the run's secret so a forged one is refused.

The learners steer each other through the rendezvous store: a stop after a signal
(:mod:`asrdist.parallel.processes.preempt`), a departure
(:mod:`asrdist.parallel.processes.membership`), a failure report and the learners' pids
(:mod:`asrdist.parallel.processes.health`), a learner done with the store process
(:mod:`asrdist.parallel.processes.storehost`). torch's TCPStore has no authentication, so one
``set`` by any process that reaches its port would stop, drop or end learners. Each such value is
therefore stored as ``VALUE|HMAC``, the HMAC (SHA-256) keyed by the run's secret
(:mod:`asrdist.parallel.processes.secret`) over the key's full name and the value, so a signature
made for one key is no good for another. A value without a valid signature is treated as absent and
named on stderr once (``asrdist: refused ...``). Counters (``add``) and plain waits are not signed:
see docs/threat_model.md for what an unauthenticated process can still do.
"""

from __future__ import annotations

import hashlib
import hmac

import torch.distributed as dist

from asrdist.errors import AsrdistError
from asrdist.parallel.processes import secret
from asrdist.progress import say

SEP = "|"
CLAIM_TRIES = 16  # a claim that loses to forged values this often: someone floods the key


class SignedStore:
    """The keys of ``store`` (a view under ``prefix``, which the signatures cover and the log
    names), their values signed with the run's secret."""

    def __init__(self, store: dist.Store, prefix: str) -> None:
        self.store, self.prefix = store, prefix
        self._key = secret.derive("store-messages")
        self._refused: set[tuple[str, bytes]] = set()

    def sign(self, key: str, value: str) -> str:
        """``value`` as stored under ``key``: with its signature."""
        mac = hmac.new(self._key, f"{self.prefix}{key}\0{value}".encode(), hashlib.sha256)
        return f"{value}{SEP}{mac.hexdigest()}"

    def verify(self, key: str, raw: bytes) -> str | None:
        """The value of ``raw`` read at ``key`` if its signature is valid; None (and a line in
        the log, once for each value) if not."""
        text = raw.decode(errors="replace")
        value, _, _ = text.rpartition(SEP)
        if SEP in text and hmac.compare_digest(self.sign(key, value), text):
            return value
        if (key, raw) not in self._refused:
            self._refused.add((key, raw))
            say(f"asrdist: refused {self.prefix}{key} = {text[:80]!r} in the rendezvous store: "
                "not signed with the run's secret (forged by a process that reached the store, "
                "or another run's); going on without it")
        return None

    def set(self, key: str, value: str) -> None:
        self.store.set(key, self.sign(key, value))

    def check(self, key: str) -> bool:
        """Whether ``key`` holds anything (signed or not: :meth:`get` tells)."""
        return bool(self.store.check([key]))

    def get(self, key: str) -> str | None:
        """The signed value at ``key``; None where there is none or it is forged."""
        if not self.store.check([key]):
            return None
        return self.verify(key, self.store.get(key))

    def claim(self, key: str, value: str) -> str:
        """The first signed value written at ``key``: ``value`` if no signed one was there
        (first writer wins, as ``compare_set``, a forged value counting as none)."""
        mine, expected = self.sign(key, value), b""
        for _ in range(CLAIM_TRIES):
            raw = self.store.compare_set(key, expected, mine)
            found = self.verify(key, raw)
            if found is not None:
                return found
            # a forged value to replace; or, if the answer is what was expected, none at all
            expected = b"" if raw == expected else raw
        raise AsrdistError(f"{self.prefix}{key}: the rendezvous store keeps answering with "
                           f"values not signed with the run's secret ({CLAIM_TRIES} tries): "
                           "another process is writing there")
