"""The operator's campaign on a jump-host topology, command by command.

`train` (commands run in "container 200" through a `pct exec 200 --` shim) and
`eval` are OpenSSH hosts in network namespaces that reach only this machine. The
train container holds a SpecForge DFlash log, checkpoints and a 3.4 GB sparse
drafter for another target; the eval host holds a dflash-cache/1 suite. Each step
prints the command, its exit status, its time and its output, as an operator sees
them. Not a test: run it, read it, paste it.

    .venv/bin/python bench/campaign.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from jump_console import jump_topology  # noqa: E402

from tests.checkpoints.drafters import BIG_CONFIG, big_drafter  # noqa: E402
from tests.testbed import hosts_toml, sshd_host_entry  # noqa: E402

CLI = [str(ROOT / ".venv" / "bin" / "dflash-tui")]


def step(title: str, argv: list[str], config: Path, shown: int = 14) -> subprocess.CompletedProcess:
    """Run one CLI command as an operator would, and print what they would see."""
    started = time.monotonic()
    out = subprocess.run(
        [*CLI, *argv, "--config", str(config)], capture_output=True, text=True, timeout=300
    )
    took = time.monotonic() - started
    print(f"\n### {title}\n$ dflash-tui {' '.join(argv)}    (exit {out.returncode}, {took:.2f} s)")
    lines = (out.stdout + out.stderr).rstrip().splitlines()
    for line in lines[:shown]:
        print(f"    {line}")
    if len(lines) > shown:
        print(f"    ... {len(lines) - shown} more lines")
    return out


def written_under(home: Path) -> list[str]:
    cache = home / ".cache" / "dflash-tui"
    return sorted(str(p.relative_to(home)) for p in cache.rglob("*")) if cache.exists() else []


def main() -> None:
    from dflash_tui.demo.synthetic import write_cache, write_drafter

    bench, shim, ct = jump_topology("campaign-")
    work = bench.work
    try:
        assets = work / "assets"
        teacher = write_drafter(assets / "teacher", block_size=8, seed=2026)
        student = write_drafter(assets / "student", teacher=teacher, quality=0.05, seed=2)
        cache = write_cache(assets / "cache", drafter_dir=teacher, n_samples=3, seq_len=40, seed=4)
        for n in (1000, 2000, 3000, 4000):
            shutil.copytree(student, ct / "ckpt" / "slammed5" / f"step-{n}")
        big_drafter(ct / "ckpt" / "other-target" / "step-100")
        (ct / "ckpt" / "other-target" / "step-100" / "config.json").write_text(
            json.dumps(BIG_CONFIG)
        )
        liar = shutil.copytree(student, ct / "ckpt" / "liar")
        cfg = json.loads((liar / "config.json").read_text())
        (liar / "config.json").write_text(json.dumps({**cfg, "hidden_size": 128}))
        (ct / "logs").mkdir()
        shutil.copy(ROOT / "tests/monitor/fieldlogs/specforge_dflash.log", ct / "logs/train.log")
        suite_dir = shutil.copytree(cache, bench.eval.home / "eval" / "coding")
        (bench.eval.home / "models").mkdir()

        train = sshd_host_entry(bench.train, bench.key)
        train["exec_prefix"] = [str(shim), "exec", "200", "--"]
        evalhost = sshd_host_entry(bench.eval, bench.key)
        evalhost["python"] = str(ROOT / ".venv" / "bin" / "python")
        evalhost["device"] = "cpu"
        extra = f"""
[[runs]]
name = "slammed5"
host = "train"
log = "logs/train.log"
checkpoints = "ckpt/slammed5/step-*"

[[suites]]
name = "coding"
host = "eval"
cache = "{suite_dir}"
"""
        config = hosts_toml(
            work / "hosts.toml",
            {"train": train, "eval": evalhost},
            known_hosts=bench.known,
            extra=extra,
        )
        print(f"train {bench.train.address} (pct exec 200), eval {bench.eval.address}")
        print(f"config {config}")

        step("status on a SpecForge DFlash log", ["status"], config)
        before = written_under(bench.eval.home)
        step(
            "eval of a 3.4 GB (sparse) drafter for another target",
            ["eval", "train:ckpt/other-target/step-100", "coding"],
            config,
        )
        after = written_under(bench.eval.home)
        print(f"    eval host ~/.cache/dflash-tui before: {before}, after: {after}")
        step(
            "inspect: hidden_size 128 over 64-wide tensors", ["inspect", "train:ckpt/liar"], config
        )
        step(
            "inspect --against: the two configs differ",
            ["inspect", "train:ckpt/liar", "--against", "train:ckpt/slammed5/step-1000"],
            config,
            shown=30,
        )
        step(
            "estimate with a suite that does not exist",
            ["estimate", "--acc", "0.5", "--suite", "nope"],
            config,
        )
        step(
            "relay a checkpoint",
            ["relay", "train:ckpt/slammed5/step-1000", f"eval:{bench.eval.home}/models/"],
            config,
        )
        step(
            "relay it again (up to date)",
            ["relay", "train:ckpt/slammed5/step-1000", f"eval:{bench.eval.home}/models/"],
            config,
        )
        out = step(
            "eval that fits, on a CPU host",
            ["eval", "slammed5/step-4000", "coding", "--wait", "--json"],
            config,
            shown=3,
        )
        job_id = json.loads(out.stdout)["job"]["id"] if out.stdout.startswith("{") else None
        if job_id:
            step("the job, one line", ["jobs"], config)
            step("the job in full", ["jobs", job_id], config, shown=20)
        step("leaderboard", ["leaderboard"], config)

        bench.hosts[1].stop()  # train's sshd: connection refused
        step("eval while the train host is down", ["eval", "slammed5/step-4000", "coding"], config)
        link = f"{bench.namespaces[1].name}o"
        subprocess.run(["ip", "link", "set", link, "down"], check=True)
        step("check with the train host's link down", ["check"], config)
        subprocess.run(["ip", "link", "set", link, "up"], check=True)
        # a host whose key is not known yet: the trust hint
        bench.known.write_text(bench.eval.known_hosts_line())
        bench.hosts[1].start()
        step("check with the train host's key unknown", ["check"], config)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
