"""Pieces of a large file through worker processes, to spread the SSH crypto over cores.

In one process every byte of a relay is decrypted (from the source's
connection) and encrypted again (for the destination's) by one Python thread:
a large file is bound by that one core while the others idle. Here each worker
is its own process (`python -m dflash_tui.transfer.hosts.procs`) with its own pair
of connections, opened by the pool's code from the same config (the same host
keys, identities and jump hosts), and runs the same StreamWorker on the pieces
it is given. The engine stays in the parent: it hears, as JSON lines, what each
piece sent and how far it landed (recorded for resume) and the pieces' hashes.

Workers start as soon as the walk shows a large file, so their interpreter
start and connections overlap the destination check.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dflash_tui.transfer.errors import ConnectionLost, TransferError
from dflash_tui.transfer.hosts.streams import Piece, Rename, StreamHooks

if TYPE_CHECKING:
    from dflash_tui.remote.pool import HostPool

STOP_WAIT_S = 3.0


def worker_count(pieces: int, streams: int) -> int:
    """Worker processes for `pieces` pieces: no more than cores (each is CPU-bound)."""
    return max(1, min(pieces, streams, os.cpu_count() or 1))


class ProcWorker:
    """One worker process and its pieces, seen from the engine."""

    def __init__(self, pool: HostPool, src_host: str, dst_host: str) -> None:
        self.pool = pool
        self.src_host = src_host
        self.dst_host = dst_host
        self.proc: asyncio.subprocess.Process | None = None
        self._ready: asyncio.Future[None] | None = None

    async def start(self) -> ProcWorker:
        """Start the process; it connects to both hosts at once (see ready())."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "dflash_tui.transfer.hosts.procs",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=1 << 20,
        )
        setup = {
            "config": str(self.pool.config.path),
            "known_hosts": str(self.pool.known_hosts_path),
            "connect_timeout_s": self.pool.connect_timeout_s,
            "keepalive_s": self.pool.keepalive_s,
            "src": self.src_host,
            "dst": self.dst_host,
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(setup) + "\n").encode())
        self._ready = asyncio.ensure_future(self._read_ready())
        return self

    async def ready(self) -> None:
        """Wait until the worker has connected to both hosts (raises why it could not)."""
        assert self._ready is not None
        await asyncio.shield(self._ready)

    async def _read_ready(self) -> None:
        event = await self._event()
        if event.get("e") != "ready":
            raise await self._error(event)

    async def _event(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        return json.loads(line) if line else {}

    async def _error(self, event: dict[str, Any]) -> TransferError:
        """The error an `x` event (or the process's end) stands for."""
        if event.get("e") == "x":
            if event.get("kind") == "connection":
                return ConnectionLost(event.get("host") or "worker", event["message"])
            return TransferError(event["message"], kind=event.get("kind", "failed"))
        assert self.proc is not None and self.proc.stderr is not None
        with contextlib.suppress(asyncio.TimeoutError):
            err = await asyncio.wait_for(self.proc.stderr.read(), STOP_WAIT_S)
            tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
            return TransferError(f"a transfer worker process stopped: {' | '.join(tail)}")
        return TransferError("a transfer worker process stopped")

    async def run(self, pieces: Sequence[Piece], hooks: StreamHooks, streams: int = 1) -> None:
        """Move `pieces` (none of them whole: their files are hashed and renamed by the
        engine), in order, `streams` at once, and report on `hooks` as the worker reports."""
        assert self.proc is not None and self.proc.stdin is not None and self._ready
        await self._ready
        wire = [
            {"p": p.src_path, "d": p.dst_part, "o": p.start, "e": p.end, "s": p.size}
            for p in pieces
        ]
        self.proc.stdin.write((json.dumps({"pieces": wire, "streams": streams}) + "\n").encode())
        await self.proc.stdin.drain()
        while True:
            event = await self._event()
            kind = event.get("e")
            if kind == "s":
                hooks.sent(pieces[event["i"]], event["n"])
            elif kind == "l":
                piece = pieces[event["i"]]
                piece.landed = event["u"]
                hooks.landed(piece, piece.landed)
            elif kind == "v":
                piece = pieces[event["i"]]
                piece.src_sha, piece.dst_sha = event["ss"], event["ds"]
                await hooks.verified(piece)
                piece.complete.set()
            elif kind == "end":
                return
            else:
                raise await self._error(event)

    async def close(self) -> None:
        """Stop the process (it closes its connections; the hosts' scripts end with them)."""
        if self._ready is not None:
            self._ready.cancel()
        proc, self.proc = self.proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_WAIT_S)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


# ---------------------------------------------------------------------- the worker


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class _Report:
    """StreamHooks that report to the engine over stdout."""

    def sent(self, piece: Piece, nbytes: int) -> None:
        _emit({"e": "s", "i": piece.key, "n": nbytes})

    def landed(self, piece: Piece, upto: int) -> None:
        _emit({"e": "l", "i": piece.key, "u": upto})

    async def verified(self, piece: Piece) -> Rename | None:
        _emit({"e": "v", "i": piece.key, "ss": piece.src_sha, "ds": piece.dst_sha})
        return None

    def renamed(self, piece: Piece) -> None:
        return None


async def _work() -> None:
    from dflash_tui.core.config_parse import load_config
    from dflash_tui.core.tasks import run_all
    from dflash_tui.remote.pool import HostPool
    from dflash_tui.transfer.hosts.streams import StreamWorker
    from dflash_tui.transfer.sides import RemoteSide

    loop = asyncio.get_running_loop()
    setup = json.loads(await loop.run_in_executor(None, sys.stdin.readline))
    config = load_config(setup["config"])
    pool = HostPool(
        config,
        known_hosts=Path(setup["known_hosts"]),
        connect_timeout_s=setup["connect_timeout_s"],
        keepalive_s=setup["keepalive_s"],
    )
    async with pool:
        src, dst = RemoteSide(pool, setup["src"]), RemoteSide(pool, setup["dst"])
        await asyncio.gather(src.connect(), dst.connect())
        _emit({"e": "ready"})
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        request = json.loads(line)
        wire = request["pieces"]
        pieces = deque(
            Piece(i, w["p"], w["d"], w["o"], w["e"], w["s"], False) for i, w in enumerate(wire)
        )
        hooks = _Report()
        count = max(1, min(len(wire), request["streams"]))
        await run_all([StreamWorker(src, dst, pieces, hooks).run() for _ in range(count)])
    _emit({"e": "end"})


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        asyncio.run(_work())
    except ConnectionLost as exc:
        _emit({"e": "x", "kind": exc.kind, "message": exc.message, "host": exc.host})
        sys.exit(1)
    except TransferError as exc:
        _emit({"e": "x", "kind": exc.kind, "message": exc.message})
        sys.exit(1)


if __name__ == "__main__":
    main()
