"""A host goes down and comes back on the demo cluster, watched by the console's
session and by `dflash-tui watch` at once: one HOST DOWN, one HOST RECOVERED.

Every demo host is a real OpenSSH sshd (tests/demo_on_sshd.py). The console's side
is a ConsoleSession in this process (the session the console runs, with its
notifications); `watch` is its own process. Both use the same config and state
database, so the claim there decides which of them sends each message. The
storage host's sshd is stopped (its sessions killed, so the pooled connections
drop) and then started again on the same port.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.demo.cluster import DemoCluster, DemoRun
from dflash_tui.notify import Notice, Outcome
from tests.demo_on_sshd import sshd_server_factory
from tests.notify.hookserver import HookServer
from tests.notify.watch_process import start_watch
from tests.testbed import require_sshd
from tests.waiting import async_wait_until

REFRESH_S = 0.5
SECRET = "tok-HostDown4471secret"

pytestmark = pytest.mark.slow


async def test_host_down_and_back_is_one_message_each(tmp_path: Path, hook: HookServer) -> None:
    require_sshd()
    cluster = DemoCluster(
        tmp_path / "demo",
        trainer_interval_s=0.3,
        runs=(DemoRun("steady", "healthy", 3, checkpoints=False),),
        eval_assets=False,
        serve_host=sshd_server_factory(),
    )
    with cluster.serve_in_thread() as config:
        text = config.read_text().replace("refresh_s = 2.0", f"refresh_s = {REFRESH_S}")
        text += f'\n[notify]\nurls = ["json://127.0.0.1:{hook.port}/hook/${{HOOK_TOKEN}}"]\n'
        config.write_text(text)
        env = {**os.environ, "HOOK_TOKEN": SECRET}
        os.environ["HOOK_TOKEN"] = SECRET  # for this process's session
        try:
            seen: list[tuple[Notice, Outcome | None]] = []
            session = ConsoleSession(
                load_config(config), auto_eval=False, on_notice=lambda n, o: seen.append((n, o))
            )
            log = tmp_path / "watch.log"
            watch = start_watch(config, log, env)
            try:
                await session.start()
                assert session.notify_error is None
                await async_wait_until(
                    lambda: (
                        "host storage reachable" in log.read_text()
                        and any(h.name == "storage" and h.reachable for h in session.hosts())
                    ),
                    "both to reach the storage host",
                    timeout=60,
                    seen=log.read_text,
                )
                storage = cluster.servers["storage"].sshd  # type: ignore[attr-defined]
                storage.stop()
                await async_wait_until(
                    lambda: len(hook.received()) >= 1, "the HOST DOWN message", timeout=60
                )
                # both saw it go down (so neither can still send it)
                await async_wait_until(
                    lambda: (
                        "HOST DOWN | host storage" in log.read_text()
                        and any(
                            n.headline().startswith("HOST DOWN | host storage") for n, _ in seen
                        )
                    ),
                    "the watch and the session to see the host down",
                    seen=log.read_text,
                )
                storage.start()
                await async_wait_until(
                    lambda: len(hook.received()) >= 2, "the HOST RECOVERED message", timeout=60
                )
                await async_wait_until(
                    lambda: (
                        "HOST RECOVERED | host storage" in log.read_text()
                        and any(
                            n.headline().startswith("HOST RECOVERED | host storage")
                            for n, _ in seen
                        )
                    ),
                    "the watch and the session to see the host back",
                    seen=log.read_text,
                )
            finally:
                watch.send_signal(signal.SIGTERM)
                code = watch.wait(30)
                await session.stop()
        finally:
            os.environ.pop("HOOK_TOKEN", None)
    got = hook.received()
    print("\n\n".join(m.message for m in got))
    print(log.read_text())
    assert len(got) == 2, [m.message for m in got]
    down, back = (m.message.split("\n") for m in got)
    assert down[0].startswith("HOST DOWN | host storage | unreachable")
    assert back[0] == "HOST RECOVERED | host storage | reachable again"
    assert back[1].startswith("down for ")
    assert all(m.path == f"/hook/{SECRET}" for m in got)
    assert code == 0
    output = log.read_text()
    # each message sent by exactly one of the two
    sent_here = [n.headline() for n, o in seen if o is not None and o.sent]
    sent_there = [line for line in output.splitlines() if "-> json://127.0.0.1: sent" in line]
    assert len(sent_here) + len(sent_there) == 2, (sent_here, output)
    assert SECRET not in output
    state = (Path(config).parent / "state" / "state.sqlite3").read_bytes().decode("latin-1")
    assert SECRET not in state
