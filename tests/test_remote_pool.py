"""The host pool against a real OpenSSH sshd: connect, run, limits, reconnect, host keys."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from pathlib import Path

import asyncssh
import pytest

from dflash_tui.core.config import ConfigError
from dflash_tui.core.config_parse import load_config
from dflash_tui.remote import (
    AuthFailed,
    CommandFailed,
    HostKeyRejected,
    HostPool,
    HostUnreachable,
)
from tests.testbed import SshdHost, connect_directly, free_port
from tests.waiting import async_wait_until


async def test_connect_run_and_reuse_one_connection(sshd: SshdHost, write_config) -> None:
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        first = await pool.run("a", ["sh", "-c", "echo hello; echo oops >&2"])
        second = await pool.run("a", ["echo", "again"])
        assert first.stdout == "hello\n" and first.stderr == "oops\n"
        assert second.stdout == "again\n"
        assert pool.connection_count("a") == 1


async def test_nonzero_exit_raises_command_failed_with_stderr(sshd: SshdHost, write_config) -> None:
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        with pytest.raises(CommandFailed) as info:
            await pool.run("a", ["sh", "-c", "echo broken >&2; exit 3"])
        assert info.value.exit_status == 3
        assert "broken" in str(info.value)
        unchecked = await pool.run("a", ["false"], check=False)
        assert unchecked.exit_status == 1


# Each command counts the commands running on the host at that moment: a marker
# directory per shell ($$), listed while it sleeps. Prints its index, then the count.
_COUNT_RUNNING = (
    'mkdir -p "$1"; mkdir "$1/$$"; n=$(ls "$1" | wc -l); sleep 0.3; rmdir "$1/$$"; echo "$2 $n"'
)


async def _run_thirty_counted(pool: HostPool, folder: Path) -> int:
    """Run 30 commands at once on host `a`; the most that ran there at the same time."""
    results = await asyncio.gather(
        *(pool.run("a", ["sh", "-c", _COUNT_RUNNING, "sh", str(folder), str(i)]) for i in range(30))
    )
    pairs = [r.stdout.split() for r in results]
    assert [p[0] for p in pairs] == [str(i) for i in range(30)]
    return max(int(p[1]) for p in pairs)


async def test_thirty_concurrent_commands_respect_max_sessions(
    sshd_factory, write_config, tmp_path: Path
) -> None:
    # sshd would take 40 sessions, so it refuses nothing and cannot mask an overshoot
    # (against MaxSessions=10 the pool's retry of a refused session would hide one):
    # hosts.a.max_sessions = 10 alone must keep the host at 10 commands at once.
    roomy = sshd_factory("roomy", max_sessions=40)
    config = load_config(write_config({"a": roomy}))
    assert config.host("a").max_sessions == 10
    async with HostPool(config, max_connections_per_host=1) as pool:
        peak = await _run_thirty_counted(pool, tmp_path / "running")
        assert 2 <= peak <= 10
        assert pool.refused_sessions("a") == 0
        assert pool.connection_count("a") == 1


async def test_thirty_concurrent_commands_queue_under_sshds_own_limit(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    # At exactly sshd's MaxSessions=10 all 30 still finish on one connection. sshd may
    # refuse a few opens (it frees a closed session a moment after we see it closed);
    # the pool retries those, so they never become failures.
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config, max_connections_per_host=1) as pool:
        peak = await _run_thirty_counted(pool, tmp_path / "running")
        assert peak <= 10
        assert pool.connection_count("a") == 1


async def test_pool_opens_a_second_connection_when_the_first_is_full(
    sshd: SshdHost, write_config
) -> None:
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        results = await asyncio.gather(
            *(pool.run("a", ["sh", "-c", "sleep 0.5; echo ok"]) for i in range(15))
        )
        assert all(r.stdout == "ok\n" for r in results)
        assert pool.connection_count("a") == 2


async def test_reconnects_after_the_server_drops_the_connection(
    sshd: SshdHost, write_config
) -> None:
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        assert (await pool.run("a", ["echo", "1"])).stdout == "1\n"
        sshd.kill_sessions()
        # The first command may be cut off or succeed on a fresh connection; within a
        # few tries (the pool backs off) commands work again on a new connection.
        for _ in range(20):
            try:
                result = await pool.run("a", ["echo", "2"])
                break
            except HostUnreachable:
                continue
        assert result.stdout == "2\n"


async def test_unknown_host_key_is_refused_with_fingerprint_and_trust_hint(
    sshd: SshdHost, write_config
) -> None:
    config = load_config(write_config({"a": sshd}, trust=False))
    async with HostPool(config) as pool:
        with pytest.raises(HostKeyRejected) as info:
            await pool.run("a", ["true"])
    err = info.value
    assert not err.changed
    assert err.fingerprint == sshd.host_key.get_fingerprint("sha256")
    assert "dflash-tui trust a" in str(err)


async def test_changed_host_key_is_refused(sshd: SshdHost, write_config, known_hosts: Path) -> None:
    path = write_config({"a": sshd})
    other = (
        asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().split()
    )
    known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n")
    async with HostPool(load_config(path)) as pool:
        with pytest.raises(HostKeyRejected) as info:
            await pool.run("a", ["true"])
    assert info.value.changed
    assert "CHANGED" in str(info.value)


async def test_dead_host_fails_fast_with_a_clear_reason(write_config, client_key) -> None:
    port = free_port()
    path = write_config(
        {
            "dead": {
                "address": "127.0.0.1",
                "port": port,
                "user": "root",
                "identity": str(client_key.private),
            }
        }
    )
    async with HostPool(load_config(path)) as pool:
        with pytest.raises(HostUnreachable) as info:
            await pool.run("dead", ["true"])
    assert "refused" in str(info.value)
    assert str(port) in str(info.value)


async def test_jump_host_tunnels_through_the_pooled_connection(sshd_factory, write_config) -> None:
    bastion = sshd_factory("bastion")
    target = sshd_factory("target")
    path = write_config({"bastion": bastion, "target": (target, {"jump": "bastion"})})
    async with HostPool(load_config(path)) as pool:
        result = await pool.run("target", ["sh", "-c", "echo $HOME"])
        assert result.stdout.strip() == str(target.home)
        assert pool.connection_count("bastion") == 1


async def test_stream_kills_its_remote_process_group_on_exit(
    sshd: SshdHost, write_config, tmp_path
) -> None:
    marker = tmp_path / "tail-target.log"
    marker.write_text("line\n")
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        async with pool.stream("a", ["tail", "-F", str(marker)]) as stream:
            assert (await stream.stdout.readline()) == b"line\n"
            pgid = stream.pgid
        assert pgid is not None
        alive = await pool.run("a", ["sh", "-c", 'pgrep -g "$1" || true', "sh", str(pgid)])
        assert alive.stdout.strip() == ""


async def test_ssh_config_alias_and_identity_are_honoured(
    sshd: SshdHost, write_config, client_key, isolated_home
) -> None:
    ssh_dir = isolated_home / ".ssh"
    ssh_dir.mkdir(exist_ok=True)
    (ssh_dir / "config").write_text(
        f"Host trainer-alias\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  IdentityFile {client_key.private}\n"
    )
    # No address, port, user or identity in hosts.toml: all of it comes from ~/.ssh/config.
    path = write_config({"trainer-alias": {}}, trust=False)
    Path(load_config(path).console.known_hosts).write_text(sshd.known_hosts_line())
    async with HostPool(load_config(path)) as pool:
        assert (await pool.run("trainer-alias", ["echo", "via-config"])).stdout == "via-config\n"


async def test_ssh_agent_keys_are_used(
    sshd: SshdHost, write_config, client_key, monkeypatch, tmp_path
) -> None:
    import os
    import subprocess

    sock = tmp_path / "agent.sock"
    agent = subprocess.run(
        ["ssh-agent", "-a", str(sock)], capture_output=True, text=True, check=True
    )
    pid = int(agent.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        subprocess.run(
            ["ssh-add", str(client_key.private)],
            check=True,
            capture_output=True,
            env={**os.environ},
        )
        path = write_config({"a": (sshd, {})})
        text = path.read_text().replace(f'identity = "{client_key.private}"\n', "")
        path.write_text(text)
        assert load_config(path).hosts["a"].identity is None
        async with HostPool(load_config(path)) as pool:
            assert (await pool.run("a", ["echo", "agent"])).stdout == "agent\n"
    finally:
        os.kill(pid, 15)


async def test_keepalive_notices_a_dead_link(sshd: SshdHost, write_config) -> None:
    import os
    import signal
    import subprocess
    import time

    config = load_config(write_config({"a": sshd}, keepalive_s=0.3))
    async with HostPool(config) as pool:
        await pool.run("a", ["true"])
        children = subprocess.run(
            ["pgrep", "-P", str(sshd.process.pid)], capture_output=True, text=True
        ).stdout.split()
        for pid in children:  # the link goes silent: no RST, no FIN, just nothing
            os.kill(int(pid), signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 10
            while pool.connection_count("a") and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert pool.connection_count("a") == 0, "keepalives did not declare the link dead"
        finally:
            for pid in children:
                os.kill(int(pid), signal.SIGCONT)
        assert (await pool.run("a", ["echo", "back"])).stdout == "back\n"


async def test_run_always_ends_stdin(sshd: SshdHost, write_config) -> None:
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        for given in (None, "", b"", "data"):
            enc = None if isinstance(given, bytes) else "utf-8"
            result = await pool.run("a", ["cat"], input=given, encoding=enc, timeout=10)
            assert result.stdout == (given or ("" if enc else b""))


def _unusable_key(kind: str, folder: Path, client_key) -> Path:
    """A key file `identity` cannot use: not a key, passphrase-protected, missing, the .pub."""
    path = folder / f"id_{kind}"
    if kind == "garbage":
        path.write_text("this is not a private key\n")
    elif kind == "encrypted":
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(path, "pkcs8-pem", passphrase="secret")
    elif kind == "public":
        return client_key.public
    return path


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("garbage", "cannot use key file"),
        ("encrypted", "ssh-add"),
        ("missing", "not found"),
        ("public", "cannot use key file"),
    ],
)
async def test_an_unusable_identity_is_an_auth_error_naming_the_key(
    sshd: SshdHost, write_config, client_key, tmp_path: Path, kind: str, said: str
) -> None:
    identity = _unusable_key(kind, tmp_path, client_key)
    path = write_config({"a": (sshd, {"identity": str(identity)})})
    async with HostPool(load_config(path)) as pool:
        with pytest.raises(AuthFailed) as info:
            await pool.run("a", ["true"])
    message = str(info.value)
    assert "hosts.a.identity" in message and str(identity) in message
    assert said in message
    assert "cannot connect" not in message


async def test_a_malformed_known_hosts_is_bad_config_naming_the_file_and_line(
    sshd: SshdHost, write_config, known_hosts: Path
) -> None:
    config = load_config(write_config({"a": sshd}))
    good = known_hosts.read_text()
    known_hosts.write_text(good + "@@@\n")
    with pytest.raises(ConfigError) as info:
        HostPool(config)
    (problem,) = info.value.problems
    assert problem.key == "console.known_hosts" and problem.line is not None
    assert f"{known_hosts} line 2" in problem.message and "@@@" in problem.message
    # Broken after the pool started: that host's connect fails with the same words.
    known_hosts.write_text(good)
    async with HostPool(config) as pool:
        known_hosts.write_text(good + "@@@\n")
        with pytest.raises(HostKeyRejected, match=r"console.known_hosts: .* line 2"):
            await pool.run("a", ["true"])


async def test_a_known_hosts_path_that_is_a_folder_is_bad_config(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    folder = tmp_path / "known-hosts-folder"
    folder.mkdir()
    config = load_config(write_config({"a": sshd}, known_hosts=str(folder)))
    with pytest.raises(ConfigError) as info:
        HostPool(config)
    assert f"{folder} is a directory" in str(info.value)
    assert "console.known_hosts" in str(info.value)


async def _gone(tag: str, pid_file: Path) -> None:
    """Wait until no process mentions `tag` and the pid in `pid_file` has exited."""
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        shells = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True)
        if not shells.stdout.strip() and not Path(f"/proc/{sleeper}").exists():
            return
        await asyncio.sleep(0.1)
    assert subprocess.run(["pgrep", "-af", tag], capture_output=True, text=True).stdout == ""
    assert not Path(f"/proc/{sleeper}").exists(), f"sleep {sleeper} still runs"


_HANG = 'sleep 1000 & echo $! > "$1"; wait'


async def test_a_timed_out_command_leaves_no_process_on_the_host(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    # OpenSSH does not signal a process without a pty when its channel closes, so
    # only killing its process group stops it: the shell and its child must both go.
    tag = f"hung-{uuid.uuid4().hex[:8]}"
    child_pid = tmp_path / "child.pid"
    config = load_config(write_config({"a": sshd}))
    async with HostPool(config) as pool:
        with pytest.raises(HostUnreachable, match="timed out after 1s"):
            await pool.run("a", ["sh", "-c", _HANG, tag, str(child_pid)], timeout=1)
        await _gone(tag, child_pid)
        # Cancelled by an outer deadline instead: the same.
        child_pid.unlink()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(
                pool.run("a", ["sh", "-c", _HANG, tag, str(child_pid)], timeout=60), 1
            )
        await _gone(tag, child_pid)
        # The pool still works, and a command with a timeout keeps its output and status.
        done = await pool.run(
            "a", ["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10, check=False
        )
        assert (done.stdout, done.stderr, done.exit_status) == ("out\n", "err\n", 3)
        fed = await pool.run("a", ["cat"], input="fed\n", timeout=10)
        assert fed.stdout == "fed\n"
        raw = await pool.run("a", ["printf", "a\\nb"], timeout=10, encoding=None)
        assert raw.stdout == b"a\nb"


def _received(host: SshdHost, kind: int) -> int:
    """Packets of type `kind` sshd has logged receiving so far (DEBUG3)."""
    lines = host.log_path.read_text(errors="replace").splitlines()
    return sum(1 for line in lines if line.rstrip().endswith(f"receive packet: type {kind}"))


def _ignores_received(host: SshdHost) -> int:
    """SSH_MSG_IGNORE packets (type 2) sshd has logged receiving so far."""
    return _received(host, 2)


async def _logged_channel_close(host: SshdHost, closes_before: int, which: str) -> None:
    """Wait until sshd, which writes its log asynchronously, has logged the client's
    SSH_MSG_CHANNEL_CLOSE (type 97) of the command just run: the last packet the client
    sent for it, so every IGNORE sent before it is in the log by then."""
    await async_wait_until(
        lambda: _received(host, 97) > closes_before,
        f"sshd to log the channel close of the {which} connection's command",
        seen=lambda: f"{_received(host, 97)} closes logged, {closes_before} before",
    )


async def test_pooled_connections_send_no_ignore_packet_per_data_packet(
    sshd_factory, write_config, client_key, known_hosts: Path
) -> None:
    """asyncssh pads every packet with an empty IGNORE (a CBC countermeasure); the pool's
    connections (AES-GCM) do not, while a plain asyncssh connection still does."""
    from dflash_tui.remote.ignore_packets import is_quiet

    host = sshd_factory("a", log_level="DEBUG3")
    data = b"x" * (2 << 20)  # 64 channel packets of 32 KiB at least
    config = load_config(write_config({"a": host}))
    async with HostPool(config) as pool:
        before, closes = _ignores_received(host), _received(host, 97)
        out = await pool.run("a", ["sh", "-c", "wc -c"], input=data.decode())
        assert out.stdout.strip() == str(len(data))
        await _logged_channel_close(host, closes, "pooled")
        pooled = _ignores_received(host) - before
    async with connect_directly(
        host, client_key, known_hosts, encryption_algs=["aes128-gcm@openssh.com"]
    ) as conn:
        assert not is_quiet(conn)
        before, closes = _ignores_received(host), _received(host, 97)
        result = await conn.run("wc -c", input=data, encoding=None)
        assert result.stdout.strip() == str(len(data)).encode()
        await _logged_channel_close(host, closes, "plain")
        plain = _ignores_received(host) - before
    assert plain >= 64, f"the control connection sent {plain} ignore packets"
    assert pooled <= 2, f"the pooled connection sent {pooled} ignore packets"
