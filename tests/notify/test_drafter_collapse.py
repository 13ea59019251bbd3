"""A served drafter that collapsed mid-run (docs/monitoring.md "A served drafter that
collapsed"), end to end with real parts.

The vLLM stand-in (tests/evals/standin_engine.py) serves the tiny target with its
DFlash drafter and counts drafts as vLLM does; `--collapse-file` garbles the
drafter's blocks while a file exists, so acceptance collapses in the real counters
while the server stays healthy. The console's session reads its /metrics through the
test sshd, finds the drafter in the server's argv with the liveness probe, and
compares served tau with the harness's own tau_greedy of that drafter, stored as an
eval result. The alert goes through apprise to a loopback webhook, once; the
recovery when the drafter works again; `status --json` shows both numbers.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_tui.console.events import AlertRaised, DrafterCollapsed, Offline
from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.schema import validate_results
from dflash_tui.evals.results.store import ResultsStore
from dflash_tui.monitor import MonitorOptions
from tests.evals.served_bed import MAX_NEW, PROMPTS, STANDIN, Models, models  # noqa: F401 - a fixture
from tests.notify.fakes import FakeSession, notifications
from tests.notify.hookserver import HookServer
from tests.testbed import SshdHost, free_port
from tests.waiting import async_wait_until, wait_until

MIN_DRAFTS = 20  # the tiny drafter's windows: enough drafts, in a few requests


class Engine:
    """The stand-in running on this machine (the sshd host's own loopback)."""

    def __init__(self, assets: Models, tmp: Path) -> None:
        self.port = free_port()
        self.collapse = tmp / "collapse"
        self.log = tmp / "engine.log"
        spec = json.dumps(
            {"method": "dflash", "model": str(assets.drafter), "num_speculative_tokens": 15}
        )
        argv = [sys.executable, str(STANDIN), "--model", str(assets.target), "--speculative-config",
                spec, "--host", "127.0.0.1", "--port", str(self.port),
                "--collapse-file", str(self.collapse)]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        wait_until(self.healthy, "the stand-in engine's /health", timeout=120,
                   seen=lambda: self.log.read_text())  # fmt: skip

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def complete(self, prompt: list[int]) -> None:
        body = json.dumps({"prompt": prompt, "max_tokens": MAX_NEW}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/completions",
            body,
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            assert r.status == 200

    def serve(self, requests: int) -> None:
        prompts = [p for group in PROMPTS.values() for p in group]
        for i in range(requests):
            self.complete(prompts[i % len(prompts)])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture
def engine(models: Models, tmp_path: Path) -> Iterator[Engine]:  # noqa: F811
    e = Engine(models, tmp_path)
    yield e
    e.stop()


def store_offline(config_path: Path, assets: Models) -> float:
    """The harness's own result for the drafter (served_bed ran it), stored as collected."""
    config = load_config(config_path)
    raw = (assets.target.parent / "offline.json").read_bytes()
    doc = json.loads(raw)
    store = ResultsStore(config.console.results_dir, open_eval_state(config.console.state_dir))
    store.add(validate_results(doc), raw, suite="tiny-suite", checkpoint="tiny-dflash",
              source="job", created_at=1.0, collected_at=1.0, job_id="job-1")  # fmt: skip
    store.conn.close()
    return float(doc["metrics"]["tau_greedy"])


async def test_a_collapsed_drafter_alerts_once_and_recovers(
    sshd: SshdHost, write_config, tmp_path: Path, engine: Engine, hook: HookServer,
    models: Models,  # noqa: F811
) -> None:  # fmt: skip
    extra = (
        f'[notify]\nurls = ["json://127.0.0.1:{hook.port}/hook"]\n\n'
        f'[[checkpoints]]\nname = "tiny-dflash"\nhost = "a"\npath = "{models.drafter}"\n\n'
        f'[[runs]]\nname = "srv"\nhost = "a"\nlog = "{engine.log}"\n'
        f'process = "standin_engine.py.*--port {engine.port}"\n'
        f'metrics = "http://127.0.0.1:{engine.port}/metrics"\n'
    )
    path = write_config({"a": sshd}, extra=extra, refresh_s=0.5)
    tau_greedy = store_offline(path, models)
    options = MonitorOptions(metrics_every_s=3600.0, metrics_timeout_s=10.0, min_drafts=MIN_DRAFTS)
    session = ConsoleSession(load_config(path), monitor_options=options, auto_eval=False)
    events: list[object] = []
    session.subscribe(events.append)
    await session.start()
    try:

        async def window(requests: int) -> None:
            """Serve `requests`, then one read of /metrics: one window, compared once."""
            await asyncio.to_thread(engine.serve, requests)
            status = session.run("srv").served_metrics
            reads = status.reads if status is not None else 0
            session.refresh_now()
            await async_wait_until(
                lambda: (s := session.run("srv").served_metrics) is not None and s.reads > reads,
                "a read of the stand-in's /metrics",
                seen=lambda: session.run("srv").served_metrics,
            )

        def found() -> list[DrafterCollapsed]:
            return [e for e in events if isinstance(e, DrafterCollapsed)]

        await async_wait_until(
            lambda: session.run("srv").processes, "the probe finding the engine's process",
            seen=lambda: session.run("srv").state_reason,
        )  # fmt: skip
        await window(8)  # the drafter as trained
        healthy = session.served_drafter("srv")
        assert healthy is not None and healthy["drafter"] == str(models.drafter)
        assert healthy["checkpoint"] == "tiny-dflash" and healthy["suite"] == "tiny-suite"
        assert healthy["tau_greedy"] == pytest.approx(tau_greedy)
        assert healthy["live_tau"] > 0.6 * tau_greedy
        assert [e.collapsed for e in found()] == [False]  # where it stands: no notice

        engine.collapse.touch()  # mid-run: the blocks come out garbled from now on
        await window(3)
        await async_wait_until(
            lambda: len(found()) == 2,
            "the collapse event",
            seen=lambda: session.served_drafter("srv"),
        )
        await window(3)  # still collapsed: no second alert
        collapsed = session.served_drafter("srv")
        assert collapsed is not None and collapsed["live_tau"] < 1.2
        await async_wait_until(lambda: len(hook.received()) >= 1, "the collapse message")

        engine.collapse.unlink()
        await window(8)
        await async_wait_until(lambda: len(hook.received()) >= 2, "the recovery message")
        await window(4)
        if session._notifications is not None:
            await session._notifications.idle()  # nothing more on its way: each sent once

        alerts = [e for e in events if isinstance(e, AlertRaised) and "drafter" in e.message]
        assert [e.collapsed for e in found()] == [False, True, False]
        assert len(alerts) == 1 and alerts[0].ring and alerts[0].subject == "srv"
        got = [m.message for m in hook.received()]
        print("\n\n".join(json.dumps(m.body, indent=1) for m in hook.received()))
        assert len(got) == 2
        first, second = got[0].split("\n"), got[1].split("\n")
        assert first[0].startswith(
            "DRAFTER COLLAPSED | host a | run srv | drafter collapsed: served tau 1."
        )
        assert f"offline tau_greedy {tau_greedy:.2f} on tiny-suite (tiny-dflash)" in first[0]
        assert first[1] == "under 0.6 of tau_greedy" and "wrong k_norm" in first[2]
        assert second[0].startswith(
            "DRAFTER RECOVERED | host a | run srv | drafter back: served tau "
        )

        out = subprocess.run(
            [sys.executable, "-m", "dflash_tui", "status", "--json", "--config", str(path)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        run = json.loads(out.stdout)["runs"][0]
        print(json.dumps(run["served_drafter"], indent=2))
        served = run["served_drafter"]
        assert served["drafter"] == str(models.drafter) and served["checkpoint"] == "tiny-dflash"
        assert served["tau_greedy"] == pytest.approx(tau_greedy)
        assert served["live_tau"] is not None and served["suite"] == "tiny-suite"
    finally:
        await session.stop()


async def test_a_console_restarted_while_collapsed_sends_the_recovery(
    tmp_path: Path, hook: HookServer
) -> None:
    """The first process announced the collapse and stopped; the next one first sees the
    drafter working: that ends the standing condition (once), where a drafter seen fine
    from the start says nothing."""
    offline = Offline("tiny-dflash", 3.0, "tiny-suite")

    def event(run: str, tau: float, collapsed: bool) -> DrafterCollapsed:
        return DrafterCollapsed(run, "a", "/m/d", offline, tau, 300.0, 0.6, collapsed)

    first = FakeSession()
    notes = notifications(tmp_path, hook, first)
    first.emit(event("srv", 1.0, True))
    await async_wait_until(lambda: len(hook.received()) == 1, "the collapse message")
    await notes.close()

    second = FakeSession()
    notes = notifications(tmp_path, hook, second)
    second.emit(event("srv", 3.1, False))  # its first comparison: fine again
    second.emit(event("other", 3.1, False))  # fine from the start: nothing ended
    await async_wait_until(lambda: len(hook.received()) == 2, "the recovery message")
    await notes.idle()
    got = [m.message.split("\n")[0] for m in hook.received()]
    assert len(got) == 2 and got[1].startswith(
        "DRAFTER RECOVERED | host a | run srv | drafter back"
    )
    await notes.close()
