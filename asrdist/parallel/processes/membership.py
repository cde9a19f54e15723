"""Elastic runs: which learners left, agreed through the rendezvous store.

Under ``--elastic`` (adpsgd, hadpsgd) a learner that dies or freezes past the exchange timeout
is dropped instead of ending the job. Whoever notices first (a heartbeat gone stale, a process
gone from this host, an exchange that timed out) records the departure under one key per
learner; the first writer wins, so every survivor reads the same step for it, and a departure
is never taken back: a frozen learner that wakes up finds itself dropped and ends. A departure
is signed with the run's secret (:mod:`asrdist.parallel.processes.signed`): one forged in the store
is refused and named in the log, and the learner it names stays.
The survivors are the learners with no such key: every one rebuilds the ring from the same
sorted list (:mod:`asrdist.parallel.rules.rings` over the survivors' positions), so no further
message is needed to agree on the pairing.

A learner that has announced it finished its steps is never dropped: it takes part in the
final average, and the survivors' list is the same on every learner once all have finished.
Learner 0 can leave like any other: an elastic run's store is served by a process of its own
(:mod:`asrdist.parallel.processes.storehost`, which also reads these keys to know when the run is
over), and the lowest survivor takes over what learner 0 does at the end (writing final.pt:
:meth:`asrdist.parallel.strategy.Strategy.leader`).
"""

from __future__ import annotations

import secrets
from datetime import timedelta

import torch.distributed as dist

from asrdist.parallel.processes.signed import SignedStore

_PREFIX = "asrdist/elastic/"


class Membership:
    """The departures of a run of ``world_size`` learners, in ``store`` (the default group's).

    ``drop`` and ``refresh`` talk to the store (another process): callers on a thread that
    must not fail for it catch ``RuntimeError``/``OSError`` (the liveness thread does, and ends
    the learner with the store lost).
    """

    def __init__(self, store: dist.Store, world_size: int) -> None:
        self._store = dist.PrefixStore(_PREFIX, store)
        self._signed = SignedStore(self._store, _PREFIX)
        self.world_size = world_size
        self.left: dict[int, int] = {}  # rank -> the step it left at, as far as read
        self._count = 0  # departures read so far (the store's counter)

    def drop(self, rank: int, step: int) -> bool:
        """Record that learner ``rank`` left at ``step``; False if another learner recorded it
        first (then ``left`` holds the step it wrote)."""
        mine = f"{step} {secrets.token_hex(8)}"  # the token tells this claim from another's
        first = self._signed.claim(f"left/{rank}", mine) == mine
        if first:
            self._store.add("count", 1)
        self.refresh(force=True)
        return first

    def refresh(self, force: bool = False) -> dict[int, int]:
        """Read the departures recorded since the last call (one store call when none)."""
        count = self._store.add("count", 0)
        if count != self._count or force:
            keys = {r: f"left/{r}" for r in range(self.world_size) if r not in self.left}
            for r, key in keys.items():
                value = self._signed.get(key)  # None: none, or forged (refused)
                if value is not None:
                    self.left[r] = int(value.split()[0])
            self._count = count
        return self.left

    def survivors(self) -> list[int]:
        """The learners not recorded as left, sorted (as far as read)."""
        return [r for r in range(self.world_size) if r not in self.left]

    def group(self, purpose: str, ranks: list[int], timeout_s: float) -> dist.ProcessGroup:
        """A gloo group of ``ranks`` (this learner among them), made by them alone: its name is
        ``purpose`` and the members, never made twice in a run since departures only shrink
        the list. Waits for every member (``timeout_s``): a member lost meanwhile makes it
        fail, and the caller tries again with the survivors."""
        name = f"{purpose}/{'-'.join(map(str, ranks))}/"
        return dist.ProcessGroupGloo(dist.PrefixStore(name, self._store),
                                     ranks.index(dist.get_rank()), len(ranks),
                                     timedelta(seconds=timeout_s))
