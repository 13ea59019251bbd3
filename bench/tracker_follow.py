"""A SpecForge-layout TensorBoard run followed through cut connections, and read once.

A real tensorboardX SummaryWriter (in a process of its own, flushing every step)
writes SpecForge's scalars under `output_dir/runs` on an sshd host while the
console's Monitor follows the directory; every few seconds every session of the
host is killed (sshd's processes under the listener), wherever the writer or
the reader is, so some cuts fall mid-record. At the end the records the file
holds are counted against what the Monitor read (records and scalars), and each
name's series (its newest points, as many as the feed keeps) is compared with
the steps the writer logged: lost, repeated, corrupt.

Then the one-shot read: `dflash-tui status --json` on the finished run (connect,
find the newest events file, read and decode it on this machine) against what
an operator does to look at it, `scp` the events file here (before opening it in
TensorBoard). Medians of `--rounds`.

    .venv/bin/python bench/tracker_follow.py --steps 3000 --cuts 6

Needs sshd (the test bed's). Not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from dflash_tui.core.config_parse import load_config  # noqa: E402
from dflash_tui.monitor import Monitor, MonitorOptions  # noqa: E402
from dflash_tui.monitor.trackers.feed import POINTS_PER_NAME  # noqa: E402
from dflash_tui.remote import HostPool  # noqa: E402
from tests.monitor.trackers.writers import record_ends  # noqa: E402
from tests.testbed import ClientKey, SshdHost, hosts_toml, sshd_host_entry  # noqa: E402
from tests.waiting import async_wait_until  # noqa: E402


def specforge_scalars(step: int) -> dict[str, float]:
    """SpecForge's names (specforge/tracker.py) for a run that learns: loss falls, acc rises."""
    acc = 0.3 + 0.5 * (1 - math.exp(-step / 800))
    out = {
        "train/loss": 0.5 + 2.0 * math.exp(-step / 1000),
        "train/acc": acc,
        "train/lr": 1e-4,
        **{f"train/acc_{k}": acc * 0.8**k for k in range(3)},
    }
    if step % 10 == 0:
        out |= {
            "eval/avg_loss": 0.6 + 2.0 * math.exp(-step / 1000),
            "eval/avg_acc": acc - 0.02,
            "eval/simulated_acc_len": 1 + 3 * acc,
        }
    return out


# The writer runs in a process of its own with the same scalars.
WRITER = f"""
import math, sys, time
from tensorboardX import SummaryWriter
{inspect.getsource(specforge_scalars).replace("dict[str, float]", "dict")}
writer = SummaryWriter(logdir=sys.argv[1], flush_secs=1)
for step in range(int(sys.argv[2])):
    for name, value in specforge_scalars(step).items():
        writer.add_scalar(name, value, global_step=step)
    writer.flush()
    time.sleep(float(sys.argv[3]))
writer.close()
"""


async def follow(config_path: Path, host: SshdHost, args: argparse.Namespace, runs: Path) -> dict:
    config = load_config(config_path)
    rng = random.Random(args.seed)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(runs), str(args.steps), str(args.step_s)]
    )
    cuts = 0
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool, options=MonitorOptions(tracker_poll_s=0.2))
        await monitor.start()
        try:
            while writer.poll() is None:
                spacing = args.steps * args.step_s / (args.cuts + 1)
                await asyncio.sleep(rng.uniform(0.5, 1.5) * spacing)
                if writer.poll() is None and cuts < args.cuts:
                    host.kill_sessions()
                    cuts += 1
            (events,) = sorted(runs.glob("events.out.tfevents.*"))
            total = len(record_ends(events.read_bytes()))
            tracker = await async_wait_until(
                lambda: (
                    (t := monitor.run_view("sf").tracker) is not None and t.records >= total and t
                ),
                f"the monitor to read all {total} records",
                timeout=120,
                seen=lambda: monitor.run_view("sf").tracker,
            )
            lost = repeated = 0
            for name in specforge_scalars(0):
                want = [s for s in range(args.steps) if name in specforge_scalars(s)]
                want = want[-POINTS_PER_NAME:]  # the newest the feed keeps of each name
                got = [step for step, _ in monitor.scalar_series("sf", name)]
                lost += len(set(want) - set(got))
                repeated += len(got) - len(set(got))
            return {
                "cuts": cuts,
                "records_in_file": total,
                "records_read": tracker.records,
                "scalars_read": tracker.scalars,
                "scalars_written": sum(len(specforge_scalars(s)) for s in range(args.steps)),
                "lost": lost,
                "repeated": repeated,
                "corrupt": tracker.corrupt,
                "events_bytes": events.stat().st_size,
            }
        finally:
            await monitor.stop()
            writer.wait()


def _status(config: Path) -> tuple[float, dict]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "status", "--json", "--config", str(config)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return time.perf_counter() - started, json.loads(out.stdout)


def one_shot(
    config: Path, base: Path, host: SshdHost, key: ClientKey, runs: Path, rounds: int
) -> dict:
    """`status --json` on the run, on the host alone (import, connect, probe: the base),
    and `scp` of the events file."""
    (events,) = sorted(runs.glob("events.out.tfevents.*"))
    known = config.parent / "known_hosts"
    times: dict[str, list[float]] = {"status": [], "status_host_only": [], "scp": []}
    status: dict = {}
    for _ in range(rounds):
        elapsed, out = _status(config)
        times["status"].append(elapsed)
        status = out["runs"][0]
        times["status_host_only"].append(_status(base)[0])
        copy = config.parent / "copy.tfevents"
        started = time.perf_counter()
        subprocess.run(
            ["scp", "-q", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={known}",
             "-i", str(key.private), "-P", str(host.port),
             f"root@{host.address}:{events}", str(copy)],
            check=True,
        )  # fmt: skip
        times["scp"].append(time.perf_counter() - started)
        copy.unlink()
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "status_s": round(med["status"], 3),
        "status_host_only_s": round(med["status_host_only"], 3),
        "scp_s": round(med["scp"], 3),
        "ratio_scp_over_status": round(med["scp"] / med["status"], 2),
        "status_json_run": {
            k: status.get(k)
            for k in (
                "name",
                "log",
                "state",
                "step",
                "loss",
                "acc",
                "eval",
                "trainer_tau",
                "tracker",
            )
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="training steps the writer logs")
    parser.add_argument("--step-s", type=float, default=0.01, help="the writer's pause per step")
    parser.add_argument("--cuts", type=int, default=6, help="connection cuts while it writes")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the one-shot read")
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracker-follow-") as tmp:
        work = Path(tmp)
        key = ClientKey.generate(work / "key")
        host = SshdHost(work / "a", key).start()
        try:
            runs = work / "output" / "runs"  # SpecForge: TensorBoard under output_dir/runs
            runs.mkdir(parents=True)
            known = work / "known_hosts"
            known.write_text(host.known_hosts_line())
            config = hosts_toml(
                work / "hosts.toml",
                {"a": sshd_host_entry(host, key)},
                known_hosts=known,
                extra=f'[[runs]]\nname = "sf"\nhost = "a"\ntensorboard = "{runs}"\n',
            )
            report = {"follow": asyncio.run(follow(config, host, args, runs))}
            (work / "base").mkdir()
            base = hosts_toml(
                work / "base" / "hosts.toml", {"a": sshd_host_entry(host, key)}, known_hosts=known
            )
            report["one_shot"] = one_shot(config, base, host, key, runs, args.rounds)
        finally:
            host.stop()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
