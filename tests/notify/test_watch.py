"""`dflash-tui watch` on the demo cluster: a killed run is one message, however many watch.

Two watchers run on the same config and state (as a console and a watch would):
the trainer is killed on the train host, and the webhook gets exactly one RUN DEAD
message within stall_after_s + one refresh. SIGTERM stops both cleanly (exit 0).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from dflash_tui.demo.cluster import DemoCluster, DemoRun
from dflash_tui.monitor.tail import TAIL_MARKER
from tests.notify.hookserver import HookServer
from tests.notify.watch_process import start_watch
from tests.waiting import wait_until

REFRESH_S = 0.5
STALL_AFTER_S = 5.0
SECRET = "tok-wAtCh9137secret"

pytestmark = pytest.mark.slow


def one_run_cluster(tmp_path: Path, run: str) -> DemoCluster:
    """A demo cluster with one healthy run logging 5 lines a second, no eval assets."""
    return DemoCluster(
        tmp_path / "demo",
        trainer_interval_s=0.2,
        runs=(DemoRun(run, "healthy", 3, checkpoints=False),),
        eval_assets=False,
    )


def test_a_killed_run_sends_one_message(tmp_path: Path, hook: HookServer) -> None:
    cluster = one_run_cluster(tmp_path, "victim")
    with cluster.serve_in_thread() as config:
        text = config.read_text().replace(
            "refresh_s = 2.0",
            f"refresh_s = {REFRESH_S}\nstall_after_s = {STALL_AFTER_S}",
        )
        text += f'\n[notify]\nurls = ["json://127.0.0.1:{hook.port}/hook/${{HOOK_TOKEN}}"]\n'
        config.write_text(text)
        env = {**os.environ, "HOOK_TOKEN": SECRET}
        logs = [tmp_path / "watch1.log", tmp_path / "watch2.log"]
        watchers = [start_watch(config, log, env) for log in logs]
        try:
            for log in logs:
                wait_until(
                    lambda log=log: "run victim alive" in log.read_text(),
                    f"{log.name} to see the run alive",
                    timeout=60,
                    seen=log.read_text,
                )
            cluster.trainers[0].kill()
            cluster.trainers[0].wait(10)
            killed = time.monotonic()
            wait_until(lambda: hook.received(), "the RUN DEAD message", timeout=60)
            took = time.monotonic() - killed
            # every watcher saw it die (and logged it), so neither can still send it
            for log in logs:
                wait_until(
                    lambda log=log: "RUN DEAD | host trainbox | run victim" in log.read_text(),
                    f"{log.name} to log the death",
                    seen=log.read_text,
                )
        finally:
            for w in watchers:
                w.send_signal(signal.SIGTERM)
            codes = [w.wait(30) for w in watchers]
    got = hook.received()
    print(got[0].message)
    assert len(got) == 1, [m.message for m in got]
    assert got[0].message.startswith("RUN DEAD | host trainbox | run victim | no process matches")
    assert got[0].path == f"/hook/{SECRET}"
    assert took <= STALL_AFTER_S + REFRESH_S + 2.0, f"took {took:.1f} s"  # 2 s: a probe's time
    assert codes == [0, 0]
    outputs = [log.read_text() for log in logs]
    assert all("watch: stopped" in out for out in outputs), outputs
    assert sum("-> json://127.0.0.1: sent" in out for out in outputs) == 1, outputs
    assert any("sent by another process" in out or "already sent" in out for out in outputs)
    state = (Path(config).parent / "state" / "state.sqlite3").read_bytes()
    for where, text in [
        *zip(("watch1", "watch2"), outputs, strict=True),
        ("state", state.decode("latin-1")),
    ]:
        assert SECRET not in text, f"secret in {where}"


def _tail_gathers(log: Path) -> set[str]:
    """The gather arguments of the tail scripts on this machine following `log` (the demo's
    hosts run their commands here; a script's subshells carry its arguments too)."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            len(argv) > 11
            and argv[3] == TAIL_MARKER.encode()
            and argv[4].endswith(log.name.encode())
        ):
            found.add(argv[11].decode())
    return found


def test_watch_gathers_every_tail_for_a_refresh(tmp_path: Path) -> None:
    """watch shows no log, so no tail sends a frame per line (docs/monitoring.md
    "Gathered tails"): each one gathers for refresh_s on its host."""
    cluster = one_run_cluster(tmp_path, "busy")
    with cluster.serve_in_thread() as config:
        config.write_text(config.read_text().replace("refresh_s = 2.0", f"refresh_s = {REFRESH_S}"))
        out = tmp_path / "watch.log"
        watcher = start_watch(config, out)
        try:
            wait_until(lambda: "run busy alive" in out.read_text(), "watch to see the run alive",
                       timeout=60, seen=out.read_text)  # fmt: skip
            log = cluster.log_path("busy")
            wait_until(lambda: _tail_gathers(log), f"the tail script of {log.name}", timeout=30)
            assert _tail_gathers(log) == {f"{REFRESH_S:g}"}
        finally:
            watcher.send_signal(signal.SIGTERM)
            assert watcher.wait(30) == 0
