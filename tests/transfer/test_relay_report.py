"""How a relay reports its end: the last progress line at 100% with the average rate, and a
relay with nothing to send saying its files are up to date, in the CLI and the console."""

from __future__ import annotations

import re

from dflash_tui.cli import main
from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.core.units import size
from tests.transfer.files import random_file

MIB = 1 << 20


def relay(capsys, *args: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(["relay", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def checkpoint(folder) -> int:  # type: ignore[no-untyped-def]
    """A two-file checkpoint directory; returns its size in bytes."""
    random_file(folder / "model.safetensors", 3 * MIB)
    (folder / "config.json").write_text('{"block_size": 16}\n')
    return 3 * MIB + len('{"block_size": 16}\n')


def test_a_finished_relay_ends_at_100_percent_with_its_average_rate(
    sshd_factory, write_config, capsys
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    total = checkpoint(a.home / "ckpt")
    code, out, err = relay(capsys, f"a:{a.home}/ckpt", f"b:{b.home}/", "--config", str(config))
    assert code == 0, err
    # Not a terminal: progress comes as plain lines, a few seconds apart, and once at the end.
    lines = [line for line in out.splitlines() if "| total" in line]
    assert lines, out
    last = lines[-1]
    assert re.search(r"\| total 100% avg \d[\d.]* (B|KiB|MiB|GiB)/s$", last), last
    assert " 0 B/s" not in last and "ETA" not in last
    assert f"2 files, {size(total)} [transfer " in out
    assert re.search(rf"done: 2 files, {re.escape(size(total))}; sent ", out), out


def test_an_up_to_date_relay_says_so_with_the_size_it_did_not_send(
    sshd_factory, write_config, capsys
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config({"a": a, "b": b})
    total = checkpoint(a.home / "ckpt")
    words = (f"a:{a.home}/ckpt", f"b:{b.home}/", "--config", str(config))
    assert relay(capsys, *words)[0] == 0
    code, out, err = relay(capsys, *words)
    assert code == 0, err
    header = out.splitlines()[0]
    assert header.startswith(f"relay a:{a.home}/ckpt -> b:{b.home}/ckpt: ")
    assert f": 2 files up to date ({size(total)}) [transfer " in header, header
    assert f"done: 2 files up to date ({size(total)}); nothing sent" in out, out
    # One of two changed at the source: what is sent and what is up to date, apart.
    (a.home / "ckpt" / "config.json").write_text('{"block_size": 8}\n')
    code, out, err = relay(capsys, *words, "--force")
    assert code == 0, err
    sent = len('{"block_size": 8}\n')
    assert f": 1 file, {size(sent)} to send; 1 file up to date ({size(3 * MIB)})" in out, out


async def test_the_console_shows_an_up_to_date_relay_and_a_finished_ones_average(
    sshd_factory, write_config
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    session = ConsoleSession(load_config(write_config({"a": a, "b": b})))
    total = checkpoint(a.home / "ckpt")
    try:
        first = await session.relay(f"a:{a.home}/ckpt", f"b:{b.home}/")
        again = await session.relay(f"a:{a.home}/ckpt", f"b:{b.home}/")
        views = {v.id: v for v in session.transfers()}
    finally:
        await session.pool.close()
    done, current = views[first], views[again]
    assert done.state == "done" and done.fraction == 1.0 and done.files_up_to_date == 0
    assert done.rate_bps and done.rate_bps > 0
    assert current.state == "done" and current.files_total == current.files_up_to_date == 2
    assert current.bytes_up_to_date == total and current.fraction == 1.0
