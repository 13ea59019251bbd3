"""A long link for the test bed: a TCP forwarder that delays and paces each direction.

This machine's kernel has no netem, so the round trip and the rate of a long
link (a cloud GPU box tens of milliseconds away) come from a small forwarder
of our own, run in the jump host's namespace in front of a host's sshd:

* every chunk read from one side is held `rtt_ms / 2` before it is written to
  the other (each direction, so a round trip costs `rtt_ms`);
* each direction of the link is one line of `rate_mbit`: a chunk leaves only
  when the line has serialised the chunks before it, whichever connection they
  belong to (so N connections share the rate, as on a real link);
* each connection holds at most `window` bytes per direction in flight (by
  default the receive buffer Linux's TCP autotuning grows to, `tcp_rmem`'s
  maximum): a real connection over a long link is bound by its TCP window too,
  and a connection's reads stop when its share is in flight.

Run as a process (`python -m tests.transfer.delay_line LISTEN_ADDR:PORT
TO_ADDR:PORT --rtt-ms R --rate-mbit M`); it prints `ready PORT` once it
listens. bench/relay.py --rtt-ms puts one in front of a host; the tests check
it gives the round trip and rate asked for (tests/transfer/test_delay_line.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

CHUNK = 256 << 10
DEFAULT_WINDOW = 6 << 20


def tcp_window() -> int:
    """The largest receive buffer TCP autotuning grows a connection to here."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    return DEFAULT_WINDOW


class Line:
    """One direction of the link: a serialising clock shared by every connection."""

    def __init__(self, delay_s: float, rate_bps: float | None) -> None:
        self.delay_s = delay_s
        self.bytes_per_s = rate_bps / 8 if rate_bps else None
        self.free_at = 0.0

    def arrival(self, nbytes: int) -> float:
        """When a chunk of `nbytes` read now reaches the other end (monotonic seconds)."""
        now = time.monotonic()
        if self.bytes_per_s is None:
            return now + self.delay_s
        self.free_at = max(now, self.free_at) + nbytes / self.bytes_per_s
        return self.free_at + self.delay_s


@dataclass
class _Flight:
    """The bytes of one connection's direction between being read and being written."""

    window: int
    queue: deque[tuple[float, bytes]]
    held: int = 0
    room: asyncio.Event | None = None
    ready: asyncio.Event | None = None


async def _carry(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, line: Line, window: int
) -> None:
    """One direction of one connection, through `line`, until EOF."""
    flight = _Flight(window, deque(), room=asyncio.Event(), ready=asyncio.Event())
    assert flight.room is not None and flight.ready is not None

    async def read() -> None:
        assert flight.room is not None and flight.ready is not None
        while True:
            while flight.held >= flight.window:
                flight.room.clear()
                await flight.room.wait()
            data = await reader.read(min(CHUNK, flight.window))
            flight.queue.append((line.arrival(len(data)), data))
            flight.held += len(data)
            flight.ready.set()
            if not data:
                return

    async def write() -> None:
        assert flight.room is not None and flight.ready is not None
        while True:
            while not flight.queue:
                flight.ready.clear()
                await flight.ready.wait()
            at, data = flight.queue.popleft()
            wait = at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
            flight.held -= len(data)
            flight.room.set()

    tasks = [asyncio.ensure_future(read()), asyncio.ensure_future(write())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


class DelayLine:
    """The forwarder: connections to `listen` are carried to `target` through two Lines."""

    def __init__(
        self,
        target: tuple[str, int],
        rtt_ms: float,
        rate_mbit: float | None,
        window: int | None = None,
    ) -> None:
        self.target = target
        rate = rate_mbit * 1e6 if rate_mbit else None
        self.up = Line(rtt_ms / 2000, rate)  # client -> target
        self.down = Line(rtt_ms / 2000, rate)  # target -> client
        self.window = window or tcp_window()

    async def _connection(
        self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter
    ) -> None:
        try:
            t_reader, t_writer = await asyncio.open_connection(*self.target)
        except OSError:
            c_writer.close()
            return
        for w in (c_writer, t_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await asyncio.gather(
                _carry(c_reader, t_writer, self.up, self.window),
                _carry(t_reader, c_writer, self.down, self.window),
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (c_writer, t_writer):
                w.close()

    async def serve(self, address: str, port: int) -> None:
        server = await asyncio.start_server(self._connection, address, port)
        bound = server.sockets[0].getsockname()[1]
        print(f"ready {bound}", flush=True)
        async with server:
            await server.serve_forever()


def _address(word: str) -> tuple[str, int]:
    host, _, port = word.rpartition(":")
    return host, int(port)


def start(
    listen: tuple[str, int], target: tuple[str, int], rtt_ms: float, rate_mbit: float | None
) -> tuple[subprocess.Popen[str], int]:
    """A delay line process; returns it and the port it listens on (once it does)."""
    root = Path(__file__).resolve().parents[2]
    argv = [
        sys.executable, "-m", "tests.transfer.delay_line",
        f"{listen[0]}:{listen[1]}", f"{target[0]}:{target[1]}", "--rtt-ms", str(rtt_ms),
    ]  # fmt: skip
    if rate_mbit:
        argv += ["--rate-mbit", str(rate_mbit)]
    proc = subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline().split()
    if len(first) != 2 or first[0] != "ready":
        proc.kill()
        raise RuntimeError(f"the delay line did not start: {first}")
    return proc, int(first[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("listen", help="ADDRESS:PORT to listen on (port 0: any)")
    parser.add_argument("target", help="ADDRESS:PORT to forward to")
    parser.add_argument("--rtt-ms", type=float, default=0.0)
    parser.add_argument("--rate-mbit", type=float, default=None)
    parser.add_argument("--window", type=int, default=None, help="bytes in flight per direction")
    args = parser.parse_args()
    line = DelayLine(_address(args.target), args.rtt_ms, args.rate_mbit, args.window)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(line.serve(*_address(args.listen)))


if __name__ == "__main__":
    main()
