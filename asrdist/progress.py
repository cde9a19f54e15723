"""How far a long loop has got: a tqdm bar on a terminal, sparse log lines anywhere else.

tqdm redraws its bar with a carriage return many times a second; in a log file (a Slurm job's,
``make demo``'s, ``| tee``) every redraw is a line. There a plain line through logging every
10 % of the work or every 30 s says as much.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator, Sized
from typing import Any, TextIO, TypeVar

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

log = logging.getLogger(__name__)

T = TypeVar("T")
_shown: list[_Bar] = []  # the bars on screen in this process
EVERY_S = 30.0  # a log line at least this often while work goes on
PARTS = 10  # and one per this part of the total done (10 %)...
MIN_GAP_S = 3.0  # ...but not closer together than this; a loop shorter than this says nothing


class Progress:
    """Work done toward ``total``, shown nowhere: the display for a rank that is not shown."""

    def __init__(self, total: int | None, desc: str, unit: str, initial: int = 0) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.postfix: dict[str, Any] = {}

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix(self, **values: Any) -> None:
        """Figures shown beside the count (a loss, a speed)."""
        self.postfix = values

    def close(self) -> None:
        pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Bar(Progress):
    """tqdm's bar; log records go above it, not through it, while it is shown."""

    def __init__(self, total: int | None, desc: str, unit: str, initial: int,
                 stream: TextIO) -> None:
        super().__init__(total, desc, unit, initial)
        self._redirect = logging_redirect_tqdm()
        self._redirect.__enter__()
        self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream,
                         dynamic_ncols=True, mininterval=0.5)
        self.stream = stream
        _shown.append(self)

    def update(self, n: int = 1) -> None:
        super().update(n)
        self._bar.update(n)

    def set_postfix(self, **values: Any) -> None:
        super().set_postfix(**values)
        self._bar.set_postfix(values, refresh=False)

    def close(self) -> None:
        if self in _shown:
            _shown.remove(self)
        self._bar.close()
        self._redirect.__exit__(None, None, None)


class _Lines(Progress):
    """A log line every 1/PARTS of the total or every EVERY_S seconds, and one at the end
    unless the last line already said it."""

    def __init__(self, total: int | None, desc: str, unit: str, initial: int) -> None:
        super().__init__(total, desc, unit, initial)
        self._start = self._last = time.monotonic()
        self._initial = initial
        self._said: tuple[int, dict[str, Any]] = (initial, {})
        self._next = self._mark_after(initial)

    def _mark_after(self, n: int) -> float:
        """The first count past ``n`` that completes a part of the total (integer arithmetic,
        so float rounding cannot put a mark back at a count already said: 199 of 398)."""
        if not self.total:
            return float("inf")
        return ((PARTS * n) // self.total + 1) * self.total / PARTS

    def update(self, n: int = 1) -> None:
        super().update(n)
        now = time.monotonic()
        since = now - self._last
        if since >= EVERY_S or (self.n >= self._next and since >= MIN_GAP_S):
            self._say(now)

    def _say(self, now: float) -> None:
        elapsed = now - self._start
        done = f"{self.n}/{self.total}" if self.total else str(self.n)
        share = f" ({100 * self.n / self.total:.0f} %)" if self.total else ""
        rate = f", {(self.n - self._initial) / elapsed:.3g} {self.unit}/s" if elapsed > 0 else ""
        extra = "".join(f", {k}={v}" for k, v in self.postfix.items())
        log.info("%s: %s %s%s, %.0f s%s%s", self.desc, done, self.unit, share, elapsed, rate,
                 extra)
        self._last, self._said = now, (self.n, dict(self.postfix))
        self._next = self._mark_after(self.n)

    def close(self) -> None:
        now = time.monotonic()
        if now - self._start >= MIN_GAP_S and (self.n, self.postfix) != self._said:
            self._say(now)


def say(line: str, stream: TextIO | None = None) -> None:
    """Write ``line`` on a line of its own, flushed, whatever bar is on screen: above this
    process's bar (tqdm redraws it below); on a terminal where another process's bar (a
    learner's, under a launcher) may hold the cursor, that line is cleared first. A line
    written straight to stderr would otherwise end up after a bar's text (``grep '^asrdist:'``
    would miss it). One write, so lines of several processes do not interleave."""
    stream = stream or sys.stderr
    if _shown and _shown[-1].stream is stream:
        tqdm.write(line, file=stream)
    else:
        stream.write(("\r\033[K" if stream.isatty() else "") + line + "\n")
    stream.flush()


def progress(total: int | None, desc: str, unit: str = "it", *, initial: int = 0,
             enabled: bool = True, stream: TextIO | None = None) -> Progress:
    """The display for a loop of ``total`` steps (None: unknown): a bar when ``stream`` (stderr)
    is a terminal, log lines otherwise, nothing when not ``enabled``. Close it (``with``)."""
    stream = stream or sys.stderr
    if not enabled:
        return Progress(total, desc, unit, initial)
    if stream.isatty():
        return _Bar(total, desc, unit, initial, stream)
    return _Lines(total, desc, unit, initial)


def track(items: Iterable[T], desc: str, unit: str = "it", total: int | None = None) -> Iterator[T]:
    """``items`` as they are consumed, counted on a :func:`progress` display."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    with progress(total, desc, unit) as bar:
        for item in items:
            yield item
            bar.update()
