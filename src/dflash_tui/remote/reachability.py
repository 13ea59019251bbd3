"""Connect to hosts concurrently and report who answers, how fast, and why not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool


@dataclass(frozen=True)
class HostCheck:
    """One host's reachability: `latency_ms` is the round trip of `true` once connected."""

    host: str
    address: str
    via: str | None
    reachable: bool
    latency_ms: float | None
    connect_ms: float | None
    error: str | None
    error_kind: str | None = None
    # Why it is unreachable (remote.unreachable): `reason` a kind (refused, timeout,
    # no_route, no_name, closed, ...), `hint` what to check; `error` holds both in words.
    reason: str | None = None
    hint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def check_host(pool: HostPool, name: str) -> HostCheck:
    """Connect (through the jump host if any) and time a `true` round trip."""
    host = pool.host(name)
    address = f"{host.address}:{host.port or 22}"
    started = time.monotonic()
    try:
        await pool.connect(name)
        connect_ms = (time.monotonic() - started) * 1000.0
        latency = await pool.ping(name)
    except RemoteError as exc:
        why = getattr(exc, "why", None)
        return HostCheck(
            name, address, host.jump, False, None, None, exc.message, type(exc).__name__,
            reason=why.kind if why else None, hint=(why.hint or None) if why else None,
        )  # fmt: skip
    return HostCheck(name, address, host.jump, True, round(latency, 1), round(connect_ms, 1), None)


async def check_hosts(pool: HostPool, names: Iterable[str] | None = None) -> list[HostCheck]:
    """check_host for every host at once; one dead host never delays or cancels the rest."""
    names = list(names if names is not None else pool.config.hosts)
    return list(await asyncio.gather(*(check_host(pool, n) for n in names)))
