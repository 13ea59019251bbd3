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


def checked_hosts(config: str) -> list[dict]:
    """`dflash-tui check --json` on `config`: every host reachable (exit 0); its hosts."""
    check = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "check", "--json", "--config", config],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    return json.loads(check.stdout)["hosts"]


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
        hosts = checked_hosts(config)
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


def pins(lock: Path) -> dict[str, str]:
    """name -> version of a pip-tools lock (the `name==version \\` lines)."""
    found = {}
    for line in lock.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split(" ")[0].split("==")
            found[name] = version
    return found


def test_the_console_lock_needs_nothing_but_the_public_index() -> None:
    # make demo installs requirements/demo.txt: no torch (whose CPU build, a local
    # version "+cpu", is on PyTorch's own index only), and setuptools to install the
    # project; the eval extra is demo-eval.txt, installed where pip finds that torch.
    # Every pin is dev.txt's: the files never disagree on a version.
    dev = pins(REPO / "requirements" / "dev.txt")
    demo = pins(REPO / "requirements" / "demo.txt")
    demo_eval = pins(REPO / "requirements" / "demo-eval.txt")
    assert not [n for n, v in demo.items() if "+" in v], demo
    assert "torch" not in demo and "setuptools" in demo and "textual" in demo
    assert demo_eval["torch"] == "2.13.0+cpu" and "safetensors" in demo_eval
    assert set(demo) - {"setuptools"} <= set(demo_eval)
    for lock in (demo, demo_eval):
        assert {n: dev.get(n) for n in lock} == lock
    text = (REPO / "requirements" / "demo.txt").read_text()
    assert all("--hash=sha256:" in block for block in text.split("==")[1:])


def test_the_demo_without_torch_serves_and_says_in_one_line_how_to_get_it(
    tmp_path: Path,
) -> None:
    port = free_port_run(3)
    # torch hidden, as on a machine whose pip found no CPU build (make demo then runs
    # without demo-eval.txt): find_spec answers None for a module set to None
    hide = "import sys; sys.modules['torch'] = None; from dflash_tui.cli import entry; entry()"
    argv = [sys.executable, "-c", hide, "demo", "--print-config", "--dir", str(tmp_path / "d")]
    demo = subprocess.Popen(
        [*argv, "--port-base", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert demo.stdout is not None
        config = demo.stdout.readline().strip()
        assert len(checked_hosts(config)) == 3
    finally:
        demo.send_signal(signal.SIGINT)
        _, err = demo.communicate(timeout=20)
    assert demo.returncode == 0, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [
        "demo: no CPU eval: torch is not installed here; `make demo-eval` installs its CPU "
        'build (README, "The demo\'s CPU eval")'
    ]
    assert "### The demo's CPU eval" in (REPO / "README.md").read_text()
    assert not (tmp_path / "d" / "evalbox" / "eval").exists()
