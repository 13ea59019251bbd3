"""`remote.http.http_get` through a real sshd: a direct-tcpip channel on the pooled
connection, bounded in time and size, and clear errors when the far side fails."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.remote import HostPool, TunnelFailed
from dflash_tui.remote.errors import EndpointFailed
from dflash_tui.remote.http import http_get
from tests.monitor.metrics_server import MetricsServer, VllmRegistry
from tests.testbed import SshdHost, free_port


@pytest.fixture
def raw_server() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on loopback that answers each connection with the next canned
    bytes of `answers` (b"" : keep it open and say nothing)."""
    answers: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            answer = answers.pop(0) if answers else b""
            if answer:
                conn.sendall(answer)
                conn.close()
            else:
                held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1], answers
    listener.close()
    for conn in held:
        conn.close()


async def test_get_through_the_hosts_connection_without_a_new_session(
    sshd: SshdHost, write_config
) -> None:
    vllm = VllmRegistry()
    vllm.draft([2, 1])
    config = load_config(write_config({"a": sshd}))
    with MetricsServer(vllm.registry) as server:
        async with HostPool(config) as pool:
            await pool.connect("a")
            body = await http_get(pool, "a", "127.0.0.1", server.port, "/metrics")
            assert b'vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 2.0' in body
            assert pool.connection_count("a") == 1  # the pooled connection, no other
            with pytest.raises(EndpointFailed, match=r"answered HTTP 404 Not Found"):
                await http_get(pool, "a", "127.0.0.1", server.port, "/nope")


async def test_nothing_listening_is_a_tunnel_error_not_a_host_down(
    sshd: SshdHost, write_config
) -> None:
    config = load_config(write_config({"a": sshd}))
    port = free_port()
    async with HostPool(config) as pool:
        with pytest.raises(TunnelFailed) as info:
            await http_get(pool, "a", "127.0.0.1", port, "/metrics")
        assert f"cannot connect to 127.0.0.1:{port} from a: nothing answers there" in str(
            info.value
        )
        assert info.value.code == 2
        await pool.ping("a")  # the host itself is fine


async def test_an_sshd_that_forbids_forwarding_says_which_setting(
    sshd_factory, write_config
) -> None:
    host = sshd_factory("noforward", extra_config=["AllowTcpForwarding no"])
    config = load_config(write_config({"a": host}))
    async with HostPool(config) as pool:
        with pytest.raises(TunnelFailed, match=r"AllowTcpForwarding yes") as info:
            await http_get(pool, "a", "127.0.0.1", 9, "/metrics")
        assert info.value.code == 1


async def test_a_silent_server_times_out_and_a_huge_one_is_refused(
    sshd: SshdHost, write_config, raw_server: tuple[int, list[bytes]]
) -> None:
    port, answers = raw_server
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        answers.append(b"")  # accepts, never answers
        with pytest.raises(EndpointFailed, match=r"no answer from http://127.0.0.1:\d+/m within"):
            await http_get(pool, "a", "127.0.0.1", port, "/m", timeout_s=0.5)
        answers.append(b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * 300_000)
        with pytest.raises(EndpointFailed, match=r"larger than 100 KiB; refused"):
            await http_get(pool, "a", "127.0.0.1", port, "/m", max_bytes=100 * 1024)
        answers.append(b"SSH-2.0-OpenSSH\r\n")
        with pytest.raises(EndpointFailed, match=r"did not answer in HTTP"):
            await http_get(pool, "a", "127.0.0.1", port, "/m")
        # A redirect on the same server is followed (uvicorn's /metrics -> /metrics/).
        answers.append(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /metrics/\r\n\r\n")
        answers.append(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        assert await http_get(pool, "a", "127.0.0.1", port, "/metrics") == b"hello"
        # The pool is still healthy after all that.
        await pool.ping("a")


def test_metrics_key_in_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text(
        '[hosts.gpu]\n[[runs]]\nname = "srv"\nhost = "gpu"\nlog = "/l"\n'
        'metrics = "http://[::1]:8000/metrics?x=1"\n'
    )
    endpoint = load_config(path).runs[0].metrics
    assert endpoint is not None
    assert (endpoint.address, endpoint.port, endpoint.path) == ("::1", 8000, "/metrics?x=1")
