"""A relay run by `dflash-tui relay` in another pane reaches `watch`'s targets.

`watch` never sees such a relay's events: only its row in the shared state
database. Real sshd hosts, the real CLI relay in its own process, the real watch
process, and apprise delivering to a loopback webhook.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.notify.hookserver import HookServer
from tests.notify.watch_process import start_watch
from tests.testbed import SshdHost
from tests.transfer.files import random_file
from tests.waiting import wait_until

MIB = 1 << 20


def test_a_relay_finished_in_another_process_is_one_message(
    sshd_factory: Callable[..., SshdHost],
    write_config: Callable[..., Path],
    hook: HookServer,
    tmp_path: Path,
) -> None:
    a, b = sshd_factory("a"), sshd_factory("b")
    config = write_config(
        {"a": a, "b": b},
        extra=f'\n[notify]\nurls = ["json://127.0.0.1:{hook.port}/hook"]\n',
    )
    random_file(a.home / "ckpt" / "model.safetensors", 2 * MIB)
    log = tmp_path / "watch.log"
    watch = start_watch(config, log)
    try:
        wait_until(lambda: "watch: " in log.read_text(), "watch to start", seen=log.read_text)
        relay = subprocess.run(
            [sys.executable, "-m", "dflash_tui", "relay", f"a:{a.home}/ckpt", f"b:{b.home}/",
             "--config", str(config)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert relay.returncode == 0, relay.stdout + relay.stderr
        wait_until(lambda: hook.received(), "the RELAY FINISHED message", timeout=60,
                   seen=log.read_text)  # fmt: skip
    finally:
        watch.send_signal(signal.SIGTERM)
        code = watch.wait(30)
    got = [m.message for m in hook.received()]
    print("\n".join(got))
    assert len(got) == 1, got
    assert got[0].startswith("RELAY FINISHED | host b | sent 2.00 MiB\n"), got[0]
    assert f"a:{a.home}/ckpt -> b:{b.home}/" in got[0]
    assert code == 0
    assert "RELAY FINISHED" in log.read_text()
