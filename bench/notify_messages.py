"""The messages an operator's phone gets, from real events on the demo cluster.

Starts the demo cluster with every host served by OpenSSH's sshd, a webhook receiver
on loopback as the only `[notify]` target (apprise's `json://`), and `dflash-tui
watch`. Then, one after another: a training run's process is killed (RUN DEAD), the
storage host's sshd is stopped and started again (HOST DOWN, HOST RECOVERED), and the
baseline is evaluated on the demo suite with `dflash-tui eval` (EVAL FINISHED, sent by
watch once it has collected the results). Prints every message received, verbatim.

    .venv/bin/python bench/notify_messages.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dflash_tui.demo import assets as demo_assets  # noqa: E402
from dflash_tui.demo.cluster import DemoCluster, DemoRun  # noqa: E402
from tests.demo_on_sshd import sshd_server_factory  # noqa: E402
from tests.notify.hookserver import HookServer  # noqa: E402


def wait_for(what: str, ok: Callable[[], bool], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what} after {timeout_s:.0f} s")
        time.sleep(0.1)


def main() -> int:
    hook = HookServer()
    hook.start()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cluster = DemoCluster(
            work / "demo",
            trainer_interval_s=0.3,
            runs=(DemoRun("victim", "healthy", 3, checkpoints=False),),
            serve_host=sshd_server_factory(),
        )
        with cluster.serve_in_thread() as config:
            text = config.read_text().replace(
                "refresh_s = 2.0", "refresh_s = 1.0\nstall_after_s = 5"
            )
            text += f'\n[notify]\nurls = ["json://127.0.0.1:{hook.port}/hook/${{HOOK_TOKEN}}"]\n'
            config.write_text(text)
            env = {**os.environ, "HOOK_TOKEN": "secret-token"}
            log = work / "watch.log"
            with log.open("wb") as out:
                watch = subprocess.Popen(
                    [sys.executable, "-m", "dflash_tui", "watch", "--config", str(config)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            try:
                wait_for("watch to see the run", lambda: "run victim alive" in log.read_text())
                wait_for("the storage host", lambda: "host storage reachable" in log.read_text())
                cluster.trainers[0].kill()
                wait_for("RUN DEAD", lambda: len(hook.received()) >= 1)
                storage = cluster.servers["storage"].sshd  # type: ignore[attr-defined]
                storage.stop()
                wait_for("HOST DOWN", lambda: len(hook.received()) >= 2)
                storage.start()
                wait_for("HOST RECOVERED", lambda: len(hook.received()) >= 3)
                assets = cluster.wait_for_eval_assets()
                if assets is None or not assets.ok:
                    raise SystemExit(f"no demo eval assets: {assets and assets.note}")
                name = demo_assets.BASELINE_NAME
                subprocess.run(
                    [sys.executable, "-m", "dflash_tui", "eval", "zlab", demo_assets.SUITE_NAME,
                     "--config", str(config), "--wait"],
                    check=True, env=env,
                )  # fmt: skip
                wait_for(f"EVAL FINISHED ({name})", lambda: len(hook.received()) >= 4)
            finally:
                watch.send_signal(signal.SIGTERM)
                watch.wait(30)
    for got in hook.received():
        print(f"--- {got.title}\n{got.message}\n")
    hook.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
