"""Following eval jobs: one batched poll per host against one ssh per job, side by side.

Starts a real OpenSSH sshd on loopback (the test bed's SshdHost) and lays out
N job directories under its `~/.cache/dflash-tui/jobs/` as running eval jobs
leave them (a live process whose start time is recorded, a log with the
harness's JSON progress lines). Then, for several interleaved rounds, it asks
"what state and progress is every job in?" three ways and prints the median
seconds per round and the ratios:

* `SshBackend.poll` over the console's pooled connection: one remote command
  for all N jobs (liveness with the PID-reuse check, exit status, progress);
* what an operator's loop does: `ssh host 'cat J/rc; tail -n 1 J/log'` once
  per job, a new connection each time (OpenSSH defaults);
* the same loop over one multiplexed OpenSSH connection (ControlMaster), the
  fastest form of the per-job loop.

Every method's answers are checked against the known progress of each job.

    .venv/bin/python bench/jobs_poll.py               # 20 jobs, 5 rounds
    .venv/bin/python bench/jobs_poll.py --jobs 50 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from dflash_tui.core.config_parse import load_config  # noqa: E402
from dflash_tui.evals.jobs.backends import SshBackend  # noqa: E402
from dflash_tui.evals.jobs.job import Job  # noqa: E402
from dflash_tui.evals.jobs.manager import local_process_start  # noqa: E402
from dflash_tui.remote.pool import HostPool  # noqa: E402
from tests.testbed import ClientKey, SshdHost, hosts_toml, sshd_host_entry  # noqa: E402


def _layout(home: Path, n: int, pid: int, start: str) -> list[Job]:
    jobs = []
    now = time.time()
    for i in range(n):
        folder = home / ".cache/dflash-tui/jobs" / f"20260101-000000-{i:04x}"
        folder.mkdir(parents=True)
        (folder / "pid").write_text(f"{pid}\n")
        (folder / "pstart").write_text(f"{start}\n")
        lines = [json.dumps({"event": "start", "total": 4000})]
        lines += [
            json.dumps({"event": "progress", "done": d, "total": 4000})
            for d in range(0, 64 * i + 1, 64)
        ]
        (folder / "log").write_text("\n".join(lines) + "\n")
        job = Job(
            id=folder.name, backend="ssh", host="h", suite="s", checkpoint="c",
            checkpoint_host="h", checkpoint_path="p", state="running", created_at=now,
            updated_at=now, remote_dir=str(folder), pid=pid, proc_start=start,
        )  # fmt: skip
        jobs.append(job)
    return jobs


def _ssh_argv(host: SshdHost, key: ClientKey, known: Path, extra: list[str]) -> list[str]:
    return [
        "ssh", "-q", "-p", str(host.port), "-i", str(key.private), "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes", *extra,
        f"root@{host.address}",
    ]  # fmt: skip


def _per_job_loop(base: list[str], jobs: list[Job]) -> list[int]:
    done = []
    for job in jobs:
        out = subprocess.run(
            [*base, f"cat {job.remote_dir}/rc 2>/dev/null; tail -n 1 {job.remote_dir}/log"],
            capture_output=True,
            text=True,
            check=True,
        )
        done.append(json.loads(out.stdout.strip().splitlines()[-1])["done"])
    return done


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as tmp:
        root = Path(tmp)
        key = ClientKey.generate(root / "key")
        host = SshdHost(root=root / "sshd", client_key=key).start()
        sleeper = subprocess.Popen(["sleep", "3600"])
        try:
            known = root / "known_hosts"
            known.write_text(host.known_hosts_line())
            config = load_config(
                hosts_toml(
                    root / "hosts.toml", {"h": sshd_host_entry(host, key)}, known_hosts=known
                )
            )
            start = local_process_start(sleeper.pid) or ""
            jobs = _layout(host.home, args.jobs, sleeper.pid, start)
            expected = [64 * i for i in range(args.jobs)]
            plain = _ssh_argv(host, key, known, [])
            control = root / "cm"
            mux = _ssh_argv(
                host, key, known,
                ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}", "-o", "ControlPersist=60"],
            )  # fmt: skip
            times: dict[str, list[float]] = {"pool": [], "ssh": [], "mux": []}
            async with HostPool(config) as pool:
                backend = SshBackend(pool)
                await pool.connect("h")
                _per_job_loop(mux, jobs[:1])  # open the master connection
                for _ in range(args.rounds):
                    t0 = time.perf_counter()
                    statuses = await backend.poll("h", jobs)
                    times["pool"].append(time.perf_counter() - t0)
                    got = [statuses[j.id].progress_done for j in jobs]
                    assert got == expected and all(statuses[j.id].alive for j in jobs), got
                    for name, base in (("ssh", plain), ("mux", mux)):
                        t0 = time.perf_counter()
                        got = await asyncio.to_thread(_per_job_loop, base, jobs)
                        times[name].append(time.perf_counter() - t0)
                        assert got == expected, got
            subprocess.run([*mux[:-1], "-O", "exit", mux[-1]], capture_output=True)
        finally:
            sleeper.kill()
            host.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"{args.jobs} running jobs on one sshd host, {args.rounds} rounds (median seconds per round)"
    )
    print(f"  dflash-tui SshBackend.poll (1 command, pooled)   {med['pool']:.3f}s")
    print(f"  ssh per job, new connection each                 {med['ssh']:.3f}s")
    print(f"  ssh per job, one multiplexed connection          {med['mux']:.3f}s")
    print(
        f"  ratio per-job ssh / poll: {med['ssh'] / med['pool']:.1f}x; multiplexed / poll: {med['mux'] / med['pool']:.1f}x"
    )
    print(f"  (cpus: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    asyncio.run(main())
