"""The embedded demo cluster as an operator starts it, and the repo's example hosts.toml."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from dflash_tui.core.config_parse import load_config
from dflash_tui.demo.cluster import DemoCluster, demo_config_text
from dflash_tui.remote import HostPool
from tests.testbed import free_port_run

REPO = Path(__file__).resolve().parents[1]


def test_repo_hosts_toml_is_the_demo_config_on_fixed_ports() -> None:
    text = (REPO / "hosts.toml").read_text()
    assert text == demo_config_text({"trainbox": 2221, "evalbox": 2222, "storage": 2223}, ".demo/")
    config = load_config(REPO / "hosts.toml")
    assert config.console.known_hosts == REPO / ".demo" / "known_hosts"
    assert [r.name for r in config.runs] == ["slammed5", "wide-lr", "ablate-ctx"]


def test_demo_serves_until_interrupted_and_cleans_up(tmp_path: Path) -> None:
    port = free_port_run(3)  # the demo serves on port, port + 1 and port + 2
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dflash_tui",
            "demo",
            "--print-config",
            "--dir",
            str(tmp_path / "d"),
            "--port-base",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert demo.stdout is not None
        config = demo.stdout.readline().strip()
        assert config == str(tmp_path / "d" / "hosts.toml")
        check = subprocess.run(
            [sys.executable, "-m", "dflash_tui", "check", "--json", "--config", config],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.returncode == 0, check.stdout + check.stderr
        hosts = json.loads(check.stdout)["hosts"]
        assert [h["address"] for h in hosts] == [f"127.0.0.1:{port + i}" for i in range(3)]
        trainers = subprocess.run(
            ["pgrep", "-f", str(tmp_path / "d")], capture_output=True, text=True
        )
        assert (
            len(trainers.stdout.split()) >= 2
        )  # the healthy and the stalled run (the dead one exited)
    finally:
        demo.send_signal(signal.SIGINT)
        assert demo.wait(20) == 0
    left = subprocess.run(
        ["pgrep", "-f", str(tmp_path / "d") + "/trainbox"], capture_output=True, text=True
    )
    assert left.stdout.strip() == ""


async def test_a_demo_host_without_gpus_never_finds_a_real_nvidia_smi(
    tmp_path: Path, monkeypatch
) -> None:
    # As on a GPU machine: the console's PATH has an nvidia-smi (here a stand-in
    # that shows a "real" GPU). Only the demo's own fakes may answer on its hosts.
    system = tmp_path / "system-bin"
    system.mkdir()
    real = system / "nvidia-smi"
    real.write_text('#!/bin/sh\necho "0, REAL GPU, 1, 2, 3"\n')
    real.chmod(0o755)
    (system / "some-tool").write_text("#!/bin/sh\necho tool-ran\n")
    (system / "some-tool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{system}:{os.environ['PATH']}")
    cluster = DemoCluster(tmp_path / "demo", eval_assets=False, runs=())
    await cluster.start()
    try:
        async with HostPool(load_config(cluster.config_path)) as pool:
            script = "command -v nvidia-smi >/dev/null && nvidia-smi || echo none; some-tool"
            storage = await pool.run("storage", ["sh", "-c", script], timeout=30)
            evalbox = await pool.run("evalbox", ["sh", "-c", script], timeout=30)
    finally:
        await cluster.stop()
    assert storage.stdout.split("\n")[:2] == ["none", "tool-ran"]
    assert "REAL GPU" not in evalbox.stdout and "NVIDIA H100" in evalbox.stdout
