"""`dflash-tui bench` on a real sshd host, against a stand-in engine that decodes for real.

The stand-in (`standin_engine.py`) serves vLLM's endpoints and counts drafts and
accepted tokens from real greedy speculative decoding of a tiny target with a
tiny DFlash drafter, as vLLM counts them. So the bench's served tau, once the
drafts accepted past `max_tokens` are taken out, must equal the harness's
`tau_greedy` on the same cache exactly; and the gap must be that term alone.
Each way a bench goes wrong ends the job with its reason, exit 1, and no engine
left in the host's process table.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.evals.jobs.preflight import REFUSED
from tests.evals.served_bed import (  # noqa: F401 - a fixture
    FAILURES,
    STANDIN,
    Models,
    models,
    standin_engines,
)
from tests.testbed import SshdHost
from tests.waiting import wait_until


@dataclass
class Bed:
    config: Path
    host: SshdHost
    models: Models

    def cli(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "dflash_tui", *args, "--config", str(self.config)]

    def run(self, *args: str, timeout: float = 300) -> tuple[int, Any, str]:
        out = subprocess.run(self.cli(*args), capture_output=True, text=True, timeout=timeout)
        try:
            doc = json.loads(out.stdout)
        except ValueError:
            doc = out.stdout
        return out.returncode, doc, out.stderr

    def bench_jobs(self) -> list[dict[str, Any]]:
        code, doc, err = self.run("jobs", "--json")
        assert code == 0, err
        return [j for j in doc["jobs"] if j["kind"] == "bench"]

    def job(self, job_id: str) -> dict[str, Any]:
        code, doc, err = self.run("jobs", job_id, "--json")
        assert code == 0, err
        return doc.get("job", doc)

    def engines(self) -> list[str]:
        """The stand-in engines serving this bed's target, as "PID PGID ARGV" lines."""
        return standin_engines(self.models.target)


@pytest.fixture
def bed(
    sshd_factory: Callable[..., SshdHost],
    write_config: Callable[..., Path],
    models: Models,  # noqa: F811
) -> Bed:
    host = sshd_factory("bench")
    engine = [sys.executable, str(STANDIN)]
    hosts: dict[str, Any] = {"gpu": (host, {"python": sys.executable, "vllm": engine})}
    for mode in FAILURES:
        hosts[mode] = (host, {"python": sys.executable, "vllm": [*engine, "--fail", mode]})
    hosts["bare"] = (host, {"python": sys.executable, "vllm": str(host.root / "no-vllm")})
    extra = f"""
[[checkpoints]]
name = "copy"
host = "gpu"
path = "{models.drafter}"

[[suites]]
name = "served"
host = "gpu"
cache = "{models.cache}"
target = "gpu:{models.target}"
device = "cpu"
"""
    bed = Bed(write_config(hosts, extra=extra), host, models)
    yield bed
    # a failed test must leave no engine, nor the bench that would start its next one
    for line in bed.engines():
        pid, pgid = (int(word) for word in line.split()[:2])
        with contextlib.suppress(ProcessLookupError):
            if pgid != os.getpgrp():  # the job's own group (setsid), never ours
                os.killpg(pgid, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)


def test_a_console_killed_mid_bench_leaves_the_job_to_finish_and_the_board_shows_it(
    bed: Bed,
) -> None:
    console = subprocess.Popen(
        bed.cli("bench", "copy", "served", "--wait", "--json"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        listed = wait_until(
            bed.bench_jobs,
            "the bench job listed by `jobs`",
            timeout=120,
            interval=0.5,
        )
        job_id = listed[0]["id"]
        # an engine runs in each phase but not at every instant (none between the two),
        # so both are asked of one moment
        wait_until(
            lambda: (bed.job(job_id).get("progress_done") or 0) >= 1 and bed.engines(),
            "the engine serving, past the first prompt, in the host's process table",
            timeout=240,
            interval=0.5,
        )
    finally:
        console.kill()  # the console dies mid-bench (SIGKILL: no cleanup of its own)
        console.communicate()
    done = wait_until(
        lambda: (j := bed.job(job_id))["state"] in ("done", "failed") and j,
        "the bench to finish on its host without its console",
        timeout=300,
        interval=1.0,
    )
    assert done["state"] == "done", done
    assert bed.engines() == [], "no engine is left once the bench is over"
    code, collected, err = bed.run("collect", "--json")
    assert code == 0 and collected["served"], (collected, err)

    code, board, err = bed.run("leaderboard", "served", "--json")
    assert code == 0, err
    rows = {r["task"]: r for r in board["served"]}
    for task, tau_greedy in bed.models.tau_greedy.items():
        row = rows[task]
        d = row["details"]
        assert d["drafts"] > 0 and row["settings"]["engine"] == "vllm"
        # served tau = tau_greedy + past_end / drafts: the drafts vLLM accepts past max_tokens
        assert d["tau_within_max_tokens"] == pytest.approx(tau_greedy, abs=1e-9), (task, row)
        assert row["tau"] == pytest.approx(tau_greedy + d["past_end"] / d["drafts"], abs=1e-9)
        assert row["speedup"] is not None and row["baseline_tok_s"] > 0
        assert len(d["per_position"]) == 7 and d["per_position"][0] >= d["per_position"][-1]


def test_a_cancelled_bench_leaves_no_engine_on_the_host(bed: Bed) -> None:
    code, started, err = bed.run("bench", "copy", "served", "--json")
    assert code == 0, err
    job_id = started["job"]["id"]
    wait_until(lambda: bed.engines(), "the engine started on the host", timeout=120, interval=0.2)
    code, _, err = bed.run("cancel", job_id)
    assert code == 0, err
    assert bed.job(job_id)["state"] == "cancelled"
    assert bed.engines() == [], "ps on the host still lists the engine after the cancel"
    ps = subprocess.run(["ps", "-ww", "-eo", "pid,pgid,stat,args"], capture_output=True, text=True)
    print("--- ps after the cancel (python processes):")  # the report's evidence (pytest -s)
    print("\n".join(line for line in ps.stdout.splitlines() if "python" in line))


ENGINE_FAILURES = {  # the host whose engine command fails that way -> the reason's words
    "bare": "no vllm engine on this host",
    "refuse": "not a DFlash drafter this engine supports",
    "oom": "ran out of memory while starting",
    "die": "exited with status 1 mid-run",
    "nospec": "has no spec-decode counters",
}


@pytest.mark.parametrize("host", list(ENGINE_FAILURES))
def test_a_bad_engine_ends_the_bench_with_its_reason_and_nothing_running(
    bed: Bed, host: str
) -> None:
    drafter = str(bed.models.drafter)
    code, out, err = bed.run(
        "bench", f"{host}:{drafter}", "served", "--host", host, "--wait", "--json"
    )
    job = out["job"]
    assert code == 1 and job["state"] == "failed", (host, job, err)
    assert ENGINE_FAILURES[host] in job["error"], (host, job["error"])
    print(f"--- {host}: exit {code}\n{job['error']}")  # the report's messages (pytest -s)
    assert bed.engines() == [], (host, "an engine was left running")


def test_a_taken_port_and_a_refused_drafter_end_the_bench_before_any_engine(bed: Bed) -> None:
    import socket

    with socket.socket() as taken:  # something listens on the port already
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        code, out, _ = bed.run("bench", "copy", "served", "--port", port, "--wait", "--json")
    assert code == 1 and f"port {port} on 127.0.0.1 is taken" in out["job"]["error"], out
    print(f"--- port taken: exit {code}\n{out['job']['error']}")
    assert bed.engines() == []

    # the eval's preflight refuses a drafter that does not fit, before anything starts
    code, out, _ = bed.run("bench", f"gpu:{bed.models.target}", "served", "--json")
    assert code == 2 and out["job"]["error"].startswith(REFUSED), out


def test_the_served_bench_program_needs_only_the_standard_library() -> None:
    """It runs with the host's python beside an engine that brings its own packages."""
    code = (
        "import sys, pkgutil, importlib, dflash_tui.shipped.servedbench as p\n"
        "for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(' '.join(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = {m.split(".")[0] for m in out.stdout.split()}
    assert loaded - set(sys.stdlib_module_names) - {"__main__", "_distutils_hack"} == {"dflash_tui"}
    ours = {m for m in out.stdout.split() if m.startswith("dflash_tui")}
    assert all(
        m.startswith(("dflash_tui.shipped.servedbench", "dflash_tui.shipped.common"))
        or m in ("dflash_tui", "dflash_tui.shipped")
        for m in ours
    ), ours
