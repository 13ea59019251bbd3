"""The demo cluster monitored: every state visible; `status` and `logs` as real processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor import Monitor, RunState, RunStateChanged
from dflash_tui.remote import HostPool
from tests.monitor.helpers import remote_processes_mentioning


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_tui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def test_demo_runs_show_alive_and_converging_stalled_and_dead(demo_cluster) -> None:
    config = load_config(demo_cluster.config_path)
    changes: list[RunStateChanged] = []
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool)
        monitor.subscribe(lambda e: changes.append(e) if isinstance(e, RunStateChanged) else None)
        await monitor.start()
        try:

            def settled(m: Monitor) -> bool:
                # States come from the host's probe, steps, series and the dead run's
                # last line from each log's history: both load at once, in either order.
                views = [m.run_view(n) for n in ("slammed5", "wide-lr", "ablate-ctx")]
                return [v.state for v in views] == [
                    RunState.ALIVE,
                    RunState.STALLED,
                    RunState.DEAD,
                ] and all(v.tail_status == "following" for v in views)

            # Generous: it settles in about a second, but CI's 2 cores once needed longer.
            if not await monitor.wait_for(settled, 60):
                views = [monitor.run_view(n) for n in ("slammed5", "wide-lr", "ablate-ctx")]
                hosts = [monitor.host_view(n) for n in ("trainbox", "storage")]
                raise AssertionError(
                    "runs never settled: "
                    + "; ".join(
                        f"{v.name} {v.state.value} ({v.state_reason}), tail {v.tail_status}"
                        for v in views
                    )
                    + " | hosts: "
                    + "; ".join(f"{h.name} reachable={h.reachable} error={h.error}" for h in hosts)
                )
            first = monitor.run_view("slammed5")
            assert await monitor.wait_for(lambda m: m.run_view("slammed5").step > first.step, 10)
            healthy = monitor.run_view("slammed5")
            assert healthy.loss.slope_per_1k_steps < 0 < healthy.acc.slope_per_1k_steps
            assert healthy.tokens_per_s > 10_000 and healthy.total_steps == 70000
            assert healthy.eta_s is not None and healthy.log_age_s < 5
            assert healthy.tau.method == "independence" and healthy.tau.value > 1
            assert len(healthy.series) > 250 and healthy.lines[-1].seq == healthy.last_seq
            assert healthy.processes and "--run slammed5" in healthy.processes[0].command
            stalled = monitor.run_view("wide-lr")
            assert stalled.log_age_s > 600 and stalled.processes
            dead = monitor.run_view("ablate-ctx")
            assert "OutOfMemoryError" in dead.state_reason and not dead.processes
            trainbox = monitor.host_view("trainbox")
            assert trainbox.reachable and len(trainbox.gpus) == 8
            assert monitor.host_view("storage").gpus == ()
        finally:
            await monitor.stop()
    assert {(c.run, c.new) for c in changes} >= {
        ("slammed5", RunState.ALIVE),
        ("wide-lr", RunState.STALLED),
        ("ablate-ctx", RunState.DEAD),
    }


def test_status_prints_every_run_and_exits_1_for_the_dead_one(demo_cluster) -> None:
    out = cli("status", "--config", str(demo_cluster.config_path))
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["RUN", "HOST", "STATE", "STEP"]
    states = {line.split()[0]: line.split()[2] for line in lines[1:4]}
    assert states == {"slammed5": "alive", "wide-lr": "stalled", "ablate-ctx": "dead"}
    assert "ablate-ctx: dead: no process matches" in out.stdout

    js = cli("status", "--json", "--config", str(demo_cluster.config_path))
    assert js.returncode == 1
    data = json.loads(js.stdout)
    runs = {r["name"]: r for r in data["runs"]}
    assert runs["slammed5"]["state"] == "alive" and runs["slammed5"]["step"] >= 3000
    assert runs["slammed5"]["tau"]["method"] == "independence"
    assert runs["wide-lr"]["log_age_s"] > 600
    assert {h["name"] for h in data["hosts"]} == {"trainbox"}


def test_status_with_an_unreachable_host_says_unknown_quickly(demo_cluster) -> None:
    text = demo_cluster.config_path.read_text().replace(
        'host = "trainbox"\nlog = "workspace/train_ablate-ctx.log"',
        'host = "gone"\nlog = "workspace/train_ablate-ctx.log"',
    )
    text = text.replace("[[runs]]", '[hosts.gone]\naddress = "127.0.0.1"\nport = 9\n\n[[runs]]', 1)
    config = demo_cluster.base / "with-gone-host.toml"
    config.write_text(text)
    started = time.monotonic()
    out = cli("status", "--json", "--config", str(config))
    assert time.monotonic() - started < 20
    assert out.returncode == 1
    runs = {r["name"]: r for r in json.loads(out.stdout)["runs"]}
    assert runs["ablate-ctx"]["state"] == "unknown"
    assert "unreachable" in runs["ablate-ctx"]["state_reason"]
    assert runs["slammed5"]["state"] == "alive"


def test_logs_prints_the_tail_then_follows_until_ctrl_c(demo_cluster) -> None:
    out = cli("logs", "ablate-ctx", "-n", "3", "--config", str(demo_cluster.config_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "Traceback (most recent call last):",
        '  File "train_dflash_pipeline.py", line 812, in train_step',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    assert cli("logs", "nope", "--config", str(demo_cluster.config_path)).returncode == 2

    follow = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dflash_tui",
            "logs",
            "slammed5",
            "-n",
            "2",
            "-f",
            "--config",
            str(demo_cluster.config_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follow.stdout is not None
        # 2 old, then live ones; the healthy run also logs an eval line every 1000 steps
        # (and JSON per-position lines), so step lines are picked out of the first 20.
        seen = [follow.stdout.readline() for _ in range(6)]
        while sum("step " in line for line in seen) < 6 and len(seen) < 20:
            seen.append(follow.stdout.readline())
        steps = [int(line.split("step ")[1].split("/")[0]) for line in seen if "step " in line]
        assert steps == sorted(steps) and len(set(steps)) == 6
        cwd = str(demo_cluster.container_root)  # the demo's remote commands run there
        assert remote_processes_mentioning("dflash-tui-tail", cwd)
        follow.send_signal(signal.SIGINT)
        assert follow.wait(15) == 0
    finally:
        if follow.poll() is None:
            follow.kill()
    deadline = time.monotonic() + 10
    while remote_processes_mentioning("dflash-tui-tail", cwd):
        assert time.monotonic() < deadline, "the remote tail outlived `logs -f`"
        time.sleep(0.1)
