"""A jump-host topology to drive the console by hand (or from tmux): the shape the
relay form must work in.

`train` and `eval` are OpenSSH hosts in two network namespaces that reach only
this machine (the jump host), as in `bench/relay.py --netns`. Commands on `train`
run inside "container 200" through a `pct exec 200 --` shim (the Proxmox layout
of the hosts in docs/design.md "hosts.toml"). The train container holds checkpoints to complete and relay.
It writes the config, prints the console's command line, and keeps the hosts up
until Ctrl-C (or SIGTERM).

    .venv/bin/python bench/jump_console.py            # then, in tmux:
    .venv/bin/dflash-tui --config /tmp/jump-console-*/hosts.toml
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from relay_netns import NetnsBench  # noqa: E402

from dflash_tui.demo.cluster import PCT_SHIM  # noqa: E402
from tests.testbed import hosts_toml, sshd_host_entry  # noqa: E402
from tests.transfer.netns import netns_permitted  # noqa: E402


def write_checkpoints(container: Path) -> None:
    for step in (1000, 2000, 3000, 4000):
        ckpt = container / "ckpt" / "slammed5" / f"step-{step}"
        ckpt.mkdir(parents=True, exist_ok=True)
        (ckpt / "config.json").write_text(json.dumps({"model_type": "qwen3", "step": step}))
        (ckpt / "model.safetensors").write_bytes(os.urandom(2 << 20))


def jump_topology(prefix: str) -> tuple[NetnsBench, Path, Path]:
    """Train and eval in namespaces only this machine reaches, the train host's commands
    run in "container 200" through a `pct exec 200 --` shim: (bench, shim, container)."""
    problem = netns_permitted()
    if problem:
        raise SystemExit(f"needs network namespaces: {problem}")
    work = Path(tempfile.mkdtemp(prefix=prefix))
    bench = NetnsBench(work, None)
    shim = work / "bin" / "pct"
    shim.parent.mkdir()
    shim.write_text(PCT_SHIM)
    shim.chmod(0o755)
    return bench, shim, bench.train.home / "ct200"


def main() -> None:
    bench, shim, container = jump_topology("jump-console-")
    work = bench.work
    try:
        write_checkpoints(container)
        (bench.eval.home / "models").mkdir(exist_ok=True)
        train = sshd_host_entry(bench.train, bench.key)
        train["exec_prefix"] = [str(shim), "exec", "200", "--"]
        train["roles"] = ["train"]
        config = hosts_toml(
            work / "hosts.toml",
            {"train": train, "eval": sshd_host_entry(bench.eval, bench.key)},
            known_hosts=bench.known,
        )
        print(f"train {bench.train.address} (pct exec 200), eval {bench.eval.address}")
        print(f"container: {container}")
        print(f"eval home: {bench.eval.home}")
        print(f"{ROOT}/.venv/bin/dflash-tui --config {config}", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    finally:
        bench.close()


if __name__ == "__main__":
    main()
