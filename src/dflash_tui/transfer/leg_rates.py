"""Per-leg throughput of a relay: which of the two links is the slow one.

A relay's bytes cross two legs, source -> this machine -> destination, and with
backpressure end to end both move at the pace of the slower. What tells them
apart is who waits on whom. A stream (streams.py) waits either for the source's
next chunk or for the destination to take the last one; over a span of wall
time T that moved B bytes, with Ws spent waiting on the source and Wd on the
destination (each averaged over the streams), the source leg delivered B in
T - Wd (the time it was not held back by the other leg) and the destination
leg took B in T - Ws. The lower figure is the slow leg; both read above the
relay's rate where time went to neither (this machine's CPU, start and end). The OpenSSH legs (ssh_legs.py) pass the
bytes between their two processes without us: there each leg's rate is its
`ssh` process's own bytes per second (from /proc), which a pipe keeps equal.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

WINDOW_S = 3.0
# A leg that was hardly ever waited on reads at most this many times the relay's rate
# (its true capacity is not measured then, only that it is not the slow one).
MAX_HEADROOM = 20.0


@dataclass
class LegMeter:
    """Bytes and waits per leg, and the rates they give (see the module doc)."""

    src: str  # the source's label, e.g. a host name
    dst: str
    path: str = ""  # which data path: "streams", "ssh streams", "OpenSSH legs", ...
    streams: int = 1
    rtt_s: tuple[float, float] | None = None  # measured to (source, destination)
    src_bytes: int = 0
    dst_bytes: int = 0
    src_wait_s: float = 0.0  # summed over the streams
    dst_wait_s: float = 0.0
    started: float | None = None
    samples: deque[tuple[float, int, int, float, float]] = field(default_factory=deque)

    def moved(self, nbytes: int, src_wait_s: float = 0.0, dst_wait_s: float = 0.0) -> None:
        """`nbytes` crossed both legs; the stream that moved them waited this long on each."""
        self.counted(self.src_bytes + nbytes, self.dst_bytes + nbytes)
        self.src_wait_s += src_wait_s
        self.dst_wait_s += dst_wait_s

    def counted(self, src_bytes: int, dst_bytes: int) -> None:
        """The bytes each leg has carried so far (for legs counted apart)."""
        if self.started is None:
            self.started = time.monotonic()
            self._sample(self.started)
        self.src_bytes, self.dst_bytes = src_bytes, dst_bytes

    def _sample(self, now: float) -> tuple[float, int, int, float, float]:
        n = max(1, self.streams)
        row = (now, self.src_bytes, self.dst_bytes, self.src_wait_s / n, self.dst_wait_s / n)
        self.samples.append(row)
        while len(self.samples) > 2 and now - self.samples[0][0] > WINDOW_S:
            self.samples.popleft()
        return row

    def rates(self, now: float | None = None) -> tuple[float, float] | None:
        """(source leg, destination leg) bytes per second over the last few seconds;
        None before any byte moved."""
        if self.started is None:
            return None
        now = time.monotonic() if now is None else now
        t1, s1, d1, ws1, wd1 = self._sample(now)
        t0, s0, d0, ws0, wd0 = self.samples[0]
        return _pair(t1 - t0, s1 - s0, d1 - d0, ws1 - ws0, wd1 - wd0)

    def average(self, now: float | None = None) -> tuple[float, float] | None:
        """The same over the whole transfer."""
        if self.started is None:
            return None
        now = time.monotonic() if now is None else now
        n = max(1, self.streams)
        span = now - self.started
        return _pair(span, self.src_bytes, self.dst_bytes, self.src_wait_s / n, self.dst_wait_s / n)

    def summary(self) -> dict[str, Any]:
        """What the transfer's record and its finished event keep: the path, streams,
        round trips (ms) and each leg's average rate (bytes/s) by leg name."""
        rates = self.average()
        out: dict[str, Any] = {"path": self.path, "streams": self.streams}
        if self.rtt_s is not None:
            out["rtt_ms"] = [round(x * 1000, 1) for x in self.rtt_s]
        if rates is not None:
            out["rates"] = {f"{self.src}->here": rates[0], f"here->{self.dst}": rates[1]}
        return out


def _pair(span: float, src: int, dst: int, src_wait: float, dst_wait: float) -> tuple[float, float]:
    if span <= 0:
        return 0.0, 0.0
    floor = span / MAX_HEADROOM
    return src / max(floor, span - dst_wait), dst / max(floor, span - src_wait)


def endpoint_label(text: str) -> str:
    """The host of `host:path` as a leg's name; `local` for a local path (as written in
    the transfer's src/dst: local paths start with `/` or `.`, or have no `:`)."""
    head, sep, _ = text.partition(":")
    return head if sep and head and not head.startswith((".", "/")) else "local"


def live_summary(src: str, dst: str, src_bps: float, dst_bps: float) -> dict[str, Any]:
    """A `summary()`-shaped dict from a progress event's two leg rates."""
    return {
        "rates": {
            f"{endpoint_label(src)}->here": src_bps,
            f"here->{endpoint_label(dst)}": dst_bps,
        }
    }


def legs_text(summary: dict[str, Any] | None, rate: Any) -> str:
    """'eval->here 310 MB/s, here->train 98 MB/s (ssh streams x4)' from `summary()`;
    `rate` formats bytes/s. Empty when there are no figures."""
    if not summary or not summary.get("rates"):
        return ""
    legs = ", ".join(f"{leg} {rate(bps)}" for leg, bps in summary["rates"].items())
    path = summary.get("path") or ""
    streams = int(summary.get("streams") or 1)
    how = f" ({path} x{streams})" if path and streams > 1 else f" ({path})" if path else ""
    return legs + how
