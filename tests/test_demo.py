"""The embedded demo cluster as an operator starts it, and the repo's example hosts.toml."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from dflash_tui.config import load_config
from dflash_tui.demo.cluster import demo_config_text
from tests.testbed import free_port

REPO = Path(__file__).resolve().parents[1]


def test_repo_hosts_toml_is_the_demo_config_on_fixed_ports() -> None:
    text = (REPO / "hosts.toml").read_text()
    assert text == demo_config_text({"trainbox": 2221, "evalbox": 2222, "storage": 2223}, ".demo/")
    config = load_config(REPO / "hosts.toml")
    assert config.console.known_hosts == REPO / ".demo" / "known_hosts"
    assert [r.name for r in config.runs] == ["slammed5", "wide-lr", "ablate-ctx"]


def test_demo_serves_until_interrupted_and_cleans_up(tmp_path: Path) -> None:
    port = free_port()
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
