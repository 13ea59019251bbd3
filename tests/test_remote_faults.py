"""The pool against asyncssh's in-process server with injected faults."""

from __future__ import annotations

import asyncio

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.remote import HostPool, HostUnreachable
from tests.testbed import Behaviour, FaultyServer


async def test_configured_session_limit_is_never_exceeded(
    faulty_server: FaultyServer, faulty_config
) -> None:
    faulty_server.behaviour = Behaviour(max_sessions=3, delay_s=0.1)
    config = load_config(faulty_config(max_sessions=3))
    async with HostPool(config, max_connections_per_host=1) as pool:
        results = await asyncio.gather(*(pool.run("f", ["echo", str(i)]) for i in range(12)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(12)]
    assert faulty_server.refused_sessions == 0
    assert faulty_server.peak_sessions <= 3


async def test_refused_sessions_are_retried_not_failed(
    faulty_server: FaultyServer, faulty_config
) -> None:
    # The server allows fewer sessions than the config claims: refusals are absorbed.
    faulty_server.behaviour = Behaviour(max_sessions=2, delay_s=0.05)
    config = load_config(faulty_config())
    async with HostPool(config, max_connections_per_host=1) as pool:
        results = await asyncio.gather(*(pool.run("f", ["echo", str(i)]) for i in range(8)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(8)]
    assert faulty_server.refused_sessions > 0


async def test_slow_reply_times_out_with_the_command_named(
    faulty_server: FaultyServer, faulty_config
) -> None:
    faulty_server.behaviour = Behaviour(delay_s=2.0)
    config = load_config(faulty_config())
    async with HostPool(config) as pool:
        with pytest.raises(HostUnreachable, match=r"`echo slow` timed out after 0.3s"):
            await pool.run("f", ["echo", "slow"], timeout=0.3)
        faulty_server.behaviour = Behaviour()
        assert (await pool.run("f", ["echo", "fast"], timeout=5)).stdout == "fast\n"


async def test_connection_dropped_mid_output_is_reported_then_reconnected(
    faulty_server: FaultyServer, faulty_config
) -> None:
    faulty_server.behaviour = Behaviour(drop_after_bytes=100_000)
    config = load_config(faulty_config())
    async with HostPool(config, backoff_cap_s=0.2) as pool:
        with pytest.raises(HostUnreachable, match="connection lost"):
            await pool.run("f", ["head", "-c", "1000000", "/dev/zero"], encoding=None)
        faulty_server.behaviour = Behaviour()
        result = await pool.run("f", ["head", "-c", "1000000", "/dev/zero"], encoding=None)
    assert len(result.stdout) == 1_000_000
