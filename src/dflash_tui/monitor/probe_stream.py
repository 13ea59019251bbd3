"""One kept-running probe per host: a probe is a line sent and its answer read back.

Started as a command of its own every `refresh_s`, a probe cost an SSH channel
each time (open, exec, data, end of file, exit status, close: about a dozen
packets the console encrypts or decrypts, and a process object in asyncssh),
and the latency round trip another (`true`) every 10 s. Here the probe script
(`liveness.PROBE_LOOP_SCRIPT`) runs for as long as the probe loop, in a
process group of its own (`HostPool.stream`, killed when it closes): `P` asks
for a probe (one packet each way), `T` for a round trip that starts no process.

Any failure (timeout, the link dropped, output we cannot read) closes the
stream, which kills the remote script, and is raised as a `RemoteError`; the
next request starts it again, so a host that comes back is probed as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

from dflash_tui.monitor.liveness import ProbeTarget, probe_input, probe_loop_argv
from dflash_tui.remote.errors import CommandFailed, RemoteError
from dflash_tui.remote.pool import HostPool, RemoteStream

END = b"\nEND\n"
MAX_ANSWER_BYTES = 4 << 20


class ProbeStream:
    """Probes of `host` over one remote process; use as `async with ProbeStream(...)`."""

    def __init__(self, pool: HostPool, host: str) -> None:
        self.pool = pool
        self.host = host
        self.starts = 0  # remote scripts started (tests read it)
        self._stream: RemoteStream | None = None
        self._targets: tuple[ProbeTarget, ...] | None = None

    async def __aenter__(self) -> ProbeStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the remote script (its process group is killed)."""
        stream, self._stream, self._targets = self._stream, None, None
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.__aexit__(None, None, None)

    async def probe(self, targets: Sequence[ProbeTarget], timeout: float) -> str:
        """The probe's output (`liveness.parse_probe` reads it) for `targets`."""
        return await self._ask(tuple(targets), b"P\n", END, timeout)

    async def round_trip(self, targets: Sequence[ProbeTarget], timeout: float) -> float:
        """Milliseconds for a line to reach the host's script and come back."""
        await self._ensure(tuple(targets), timeout)
        started = time.monotonic()
        await self._ask(tuple(targets), b"T\n", b"T\n", timeout)
        return (time.monotonic() - started) * 1000.0

    async def _ensure(self, targets: tuple[ProbeTarget, ...], timeout: float) -> RemoteStream:
        if self._stream is not None and self._targets == targets:
            return self._stream
        await self.close()
        stream = self.pool.stream(self.host, probe_loop_argv())
        try:
            await asyncio.wait_for(stream.__aenter__(), timeout)
        except asyncio.TimeoutError:
            raise RemoteError(self.host, f"the probe did not start within {timeout:g}s") from None
        self._stream, self._targets = stream, targets
        self.starts += 1
        try:
            self._stdin(stream).write(probe_input(targets).encode())
        except Exception as exc:
            await self.close()
            raise RemoteError(self.host, f"cannot send the probe's runs: {exc}") from None
        return stream

    async def _ask(
        self, targets: tuple[ProbeTarget, ...], request: bytes, until: bytes, timeout: float
    ) -> str:
        stream = await self._ensure(targets, timeout)
        try:
            self._stdin(stream).write(request)
            answer = await asyncio.wait_for(self._read_until(stream, until), timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise RemoteError(self.host, f"the probe did not answer within {timeout:g}s") from None
        except RemoteError:
            await self.close()
            raise
        except Exception as exc:  # the link dropped, the channel closed
            await self.close()
            raise RemoteError(self.host, f"the probe stream failed: {exc}") from None
        return answer.decode("utf-8", "replace")

    async def _read_until(self, stream: RemoteStream, until: bytes) -> bytes:
        out: Any = stream.stdout
        data = await out.readuntil(until) if until != END else await self._read_probe(out)
        if not data.endswith(until):
            await self._failed(stream, data)
        return data

    async def _read_probe(self, out: Any) -> bytes:
        # The answer starts with NOW and ends with a line END; read to that line.
        data = bytearray()
        while not (data.startswith(b"NOW") and data.endswith(END)):
            line = await out.readline()
            if not line:
                break
            data += line
            if len(data) > MAX_ANSWER_BYTES:
                break
        return bytes(data)

    async def _failed(self, stream: RemoteStream, data: bytes) -> None:
        err = ""
        with contextlib.suppress(Exception):
            err = (await asyncio.wait_for(stream.stderr.read(), 2.0)).decode("utf-8", "replace")
        status = stream.process.exit_status if stream.process is not None else None
        raise CommandFailed(
            self.host, "the probe", status, err.strip()[:300] or data[:200].decode()
        )

    @staticmethod
    def _stdin(stream: RemoteStream) -> Any:
        return stream.stdin
