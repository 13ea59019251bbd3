"""The test bed's long link (tests/transfer/delay_line.py) gives the round trip and the
rate it was asked for, and several connections share that rate (as on a real link).

The bounds that matter are the ones the bench relies on: no round trip shorter than
asked, no rate above the one asked. The other side of each is loose, for a loaded
2-core machine (the forwarder is a Python process sharing the cores)."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Iterator

import pytest

from tests.transfer.delay_line import start

RTT_MS = 40.0
RATE_MBIT = 80.0  # 10 MB/s: cheap for the forwarder, long enough to measure
SEND_BYTES = 6 << 20
DEADLINE_S = 30.0


class Sink:
    """A TCP server: echoes a line that starts with `p`, else counts bytes; at EOF it
    answers with the seconds between its first and last byte received."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        first = last = 0.0
        with conn:
            while data := conn.recv(1 << 20):
                if data.startswith(b"p"):
                    conn.sendall(data)
                    continue
                last = time.monotonic()
                first = first or last
            conn.sendall(f"{first!r} {last!r}\n".encode())


@pytest.fixture
def line() -> Iterator[int]:
    sink = Sink()
    proc, port = start(("127.0.0.1", 0), ("127.0.0.1", sink.port), RTT_MS, RATE_MBIT)
    try:
        yield port
    finally:
        proc.kill()
        proc.wait()
        sink.server.close()


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _send_and_time(port: int, nbytes: int, out: list[tuple[float, float]]) -> None:
    """Send `nbytes`, then learn when the first and the last of them reached the sink."""
    with _connect(port) as sock:
        sock.sendall(b"x" * nbytes)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while not answer.endswith(b"\n"):
            got = sock.recv(100)
            assert got, "the delay line closed before the sink answered"
            answer += got
        first, last = map(float, answer.split())
        out.append((first, last))


def test_round_trip_is_the_one_asked_for(line: int) -> None:
    rtts = []
    with _connect(line) as sock:
        for _ in range(7):
            started = time.monotonic()
            sock.sendall(b"ping")
            assert sock.recv(16) == b"ping"
            rtts.append((time.monotonic() - started) * 1000)
    # Held rtt/2 each way: never shorter; longer only by what the loaded cores add.
    assert min(rtts) >= RTT_MS * 0.99, rtts
    assert statistics.median(rtts) < RTT_MS + 60, rtts


def test_rate_is_the_one_asked_for_and_shared(line: int) -> None:
    one: list[tuple[float, float]] = []
    _send_and_time(line, SEND_BYTES, one)
    first, last = one[0]
    rate_mbit = SEND_BYTES * 8 / (last - first) / 1e6
    assert rate_mbit <= RATE_MBIT * 1.1, rate_mbit  # paced: never faster than the line
    assert rate_mbit >= RATE_MBIT * 0.4, rate_mbit  # and not much slower (loaded cores)

    # Two connections at once share the line: together no faster than one.
    both: list[tuple[float, float]] = []
    threads = [
        threading.Thread(target=_send_and_time, args=(line, SEND_BYTES, both)) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
    assert len(both) == 2, "a sender did not finish"
    span = max(b[1] for b in both) - min(b[0] for b in both)
    together_mbit = 2 * SEND_BYTES * 8 / span / 1e6
    assert together_mbit <= RATE_MBIT * 1.1, together_mbit
