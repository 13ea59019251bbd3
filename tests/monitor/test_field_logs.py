"""The field's logs on a real sshd, through the live tail and `status --json` (docs/monitoring.md "What is read from each trainer and server"; docs/monitoring.md "Served acceptance").

One sshd and one config hold a run per format (tests/monitor/fieldlogs/, written
as SpecForge, speculators, vLLM and SGLang print). The module's fixture starts
with empty logs, follows them with a Monitor while their bytes arrive in 4 KiB
pieces (lines and tqdm's `\\r` redraws cut anywhere), and then runs
`dflash-tui status --json` on the complete logs (the history loaded on the host):
each test checks one format's step, total, loss, acc, per-position accuracies,
tau, tokens/s, acceptance length and eval metrics both ways.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor import AcceptanceDropped, Monitor, MonitorOptions
from dflash_tui.remote import HostPool
from tests.testbed import ClientKey, SshdHost, hosts_toml, sshd_host_entry

FIELD_LOGS = Path(__file__).parent / "fieldlogs"
CHUNK = 4096


def tau(per_position: tuple[float, ...]) -> float:
    return 1 + sum(math.prod(per_position[: k + 1]) for k in range(len(per_position)))


@dataclass(frozen=True)
class Expected:
    log: str
    step: int | None
    total: int | None
    loss: float | None = None
    acc: float | None = None
    per_position: tuple[float, ...] | None = None
    tokens_per_s: float | None = None
    acceptance: float | None = None
    acceptance_per_position: tuple[float, ...] | None = None
    reports: int | None = None
    eval_loss: float | None = None
    eval_acc: float | None = None
    total_steps_config: int | None = None  # the config's, for logs that announce none


UNIFIED_POS = (0.669402894043899, 0.5194028940438989, 0.369402894043899)
EXPECTED = {
    # Step 100 of `Total training steps: 120` (the bar says 19/40 of epoch 2); the Step
    # line's own loss and acc, not the bar's postfix.
    "specforge-dflash": Expected("specforge_dflash.log", 100, 120, loss=1.9555, acc=0.5523),
    # Per-position `Acc` lines (one position a line); `Auto-calculated total_steps: 60`;
    # loss and acc from the bar its Step lines are printed over (they carry none).
    "specforge-eagle3": Expected(
        "specforge_eagle3.log", 60, 60, loss=2.9, acc=0.47, per_position=(0.67, 0.52, 0.37)
    ),
    "specforge-unified": Expected(
        "specforge_unified.log",
        60,
        60,
        loss=2.6715177646857695,
        acc=0.5194028940438989,
        per_position=UNIFIED_POS,
        eval_loss=2.7715177646857696,
        eval_acc=0.649402894043899,
        total_steps_config=60,
    ),
    "speculators-80col": Expected(
        "speculators_80col.log",
        55,
        60,
        loss=2.799,
        acc=0.584,
        per_position=(0.704, 0.584, 0.464),
        tokens_per_s=41700.0,
        eval_loss=1.9,
        eval_acc=0.333,
        total_steps_config=60,
    ),
    "speculators-wide": Expected(
        "speculators_wide.log",
        55,
        60,
        loss=2.799,
        acc=0.584,
        per_position=(0.704, 0.584, 0.464),
        tokens_per_s=41700.0,
        eval_loss=1.9,
        eval_acc=0.333,
        total_steps_config=60,
    ),
    "vllm-serve": Expected(
        "vllm_server.log",
        None,
        None,
        tokens_per_s=194.0,
        acceptance=1.98,
        acceptance_per_position=(0.392, 0.319, 0.245, 0.172),
        reports=15,
    ),
    "sglang-serve": Expected(
        "sglang_server.log", None, None, tokens_per_s=263.0, acceptance=3.12, reports=14
    ),
}


@dataclass
class Seen:
    live: dict[str, dict[str, Any]]
    status: dict[str, dict[str, Any]]
    dropped: list[AcceptanceDropped]
    table: str
    dropped_after_reload: list[AcceptanceDropped]


def _runs_toml(folder: Path) -> str:
    out = []
    for name, e in EXPECTED.items():
        out += ["[[runs]]", f'name = "{name}"', 'host = "a"', f'log = "{folder / e.log}"']
        if e.total_steps_config is not None:
            out.append(f"total_steps = {e.total_steps_config}")
        out.append("")
    return "\n".join(out)


def _finished(view: Any, e: Expected) -> bool:
    if e.reports is not None:
        return view.acceptance is not None and view.acceptance.reports == e.reports
    return view.step == e.step and (e.eval_loss is None or view.eval_loss is not None)


async def _follow(config_path: Path, folder: Path) -> tuple[dict[str, Any], list[Any]]:
    config = load_config(config_path)
    dropped: list[AcceptanceDropped] = []
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool, options=MonitorOptions(poll_s=0.05))
        monitor.subscribe(lambda e: dropped.append(e) if isinstance(e, AcceptanceDropped) else None)
        await monitor.start()
        try:
            assert await monitor.wait_for(
                lambda m: all(m.run_view(n).tail_status == "following" for n in EXPECTED), 20
            )
            sources = {n: (FIELD_LOGS / e.log).read_bytes() for n, e in EXPECTED.items()}
            longest = max(len(data) for data in sources.values())
            for start in range(0, longest, CHUNK):
                for name, data in sources.items():
                    with (folder / EXPECTED[name].log).open("ab") as f:
                        f.write(data[start : start + CHUNK])
                await asyncio.sleep(0.03)
            done = await monitor.wait_for(
                lambda m: all(_finished(m.run_view(n), e) for n, e in EXPECTED.items()), 30
            )
            views = {n: monitor.run_view(n) for n in EXPECTED}
            assert done, {n: (v.step, v.acceptance) for n, v in views.items()}
            return {n: v.as_dict() for n, v in views.items()}, dropped
        finally:
            await monitor.stop()


async def _reopen(config_path: Path, folder: Path) -> list[AcceptanceDropped]:
    """A console opened on the finished logs: the vLLM log's drop is in its past; one
    more low report arrives live (still dropped: no change, so no event)."""
    config = load_config(config_path)
    dropped: list[AcceptanceDropped] = []
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool, options=MonitorOptions(poll_s=0.05))
        monitor.subscribe(lambda e: dropped.append(e) if isinstance(e, AcceptanceDropped) else None)
        await monitor.start()
        try:
            served = lambda m: m.run_view("vllm-serve").acceptance  # noqa: E731
            assert await monitor.wait_for(lambda m: served(m) is not None, 20)
            report = (FIELD_LOGS / "vllm_server.log").read_bytes().splitlines(keepends=True)[-2]
            with (folder / "vllm_server.log").open("ab") as f:
                f.write(report)
            assert await monitor.wait_for(lambda m: served(m).reports == 16, 20)
            return dropped
        finally:
            await monitor.stop()


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory, client_key: ClientKey) -> Iterator[Seen]:
    from tests.testbed import require_sshd

    require_sshd()
    root = tmp_path_factory.mktemp("field-logs")
    host = SshdHost(root=root / "sshd-a", client_key=client_key).start()
    try:
        known = root / "known_hosts"
        known.write_text(host.known_hosts_line())
        folder = root / "logs"
        folder.mkdir()
        for e in EXPECTED.values():
            (folder / e.log).write_bytes(b"")
        config_path = hosts_toml(
            root / "hosts.toml",
            {"a": sshd_host_entry(host, client_key)},
            known_hosts=known,
            extra=_runs_toml(folder),
            console={"refresh_s": 0.5},
        )
        live, dropped = asyncio.run(_follow(config_path, folder))

        def status(*flags: str) -> str:
            argv = [sys.executable, "-m", "dflash_tui", "status", *flags]
            out = subprocess.run(
                [*argv, "--config", str(config_path)], capture_output=True, text=True, timeout=60
            )
            assert out.stdout, out.stderr
            return out.stdout

        runs = {r["name"]: r for r in json.loads(status("--json"))["runs"]}
        table = status()
        yield Seen(live, runs, dropped, table, asyncio.run(_reopen(config_path, folder)))
    finally:
        host.stop()


def _check(run: dict[str, Any], e: Expected) -> None:
    assert run["step"] == e.step
    assert run["total_steps"] == e.total
    if e.step is not None and e.total is not None:
        assert run["progress"] == pytest.approx(e.step / e.total)
    assert run["loss"]["last"] == pytest.approx(e.loss)
    assert run["acc"]["last"] == pytest.approx(e.acc)
    assert run["acc_per_position"] == (
        pytest.approx(list(e.per_position)) if e.per_position else None
    )
    if e.per_position:
        assert run["tau"]["method"] == "independence"
        assert run["tau"]["value"] == pytest.approx(tau(e.per_position))
    assert run["tokens_per_s"] == pytest.approx(e.tokens_per_s)
    if e.eval_loss is None:
        assert run["eval"] is None
    else:
        assert run["eval"]["loss"] == pytest.approx(e.eval_loss)
        assert run["eval"]["acc"] == pytest.approx(e.eval_acc)
    if e.acceptance is None:
        assert run["acceptance_length"] is None and run["acceptance_per_position"] is None
    else:
        served = run["acceptance_length"]
        assert served["last"] == pytest.approx(e.acceptance) and served["reports"] == e.reports
        assert served["ema"] is not None and served["slope_per_100_reports"] is not None
        expected_rates = e.acceptance_per_position
        assert run["acceptance_per_position"] == (
            pytest.approx(list(expected_rates)) if expected_rates else None
        )


@pytest.mark.parametrize("name", list(EXPECTED))
def test_format_through_the_live_tail_and_status_json(seen: Seen, name: str) -> None:
    e = EXPECTED[name]
    _check(seen.live[name], e)
    _check(seen.status[name], e)


def test_served_acceptance_falling_well_below_its_level_raises_one_event(seen: Seen) -> None:
    vllm = seen.status["vllm-serve"]["acceptance_length"]
    assert vllm["dropped"] and vllm["recent_level"] == pytest.approx(3.5, abs=0.05)
    assert vllm["slope_per_100_reports"] < 0
    assert not seen.status["sglang-serve"]["acceptance_length"]["dropped"]
    assert [(d.run, d.level > 3.4, d.value < 2.3) for d in seen.dropped] == [
        ("vllm-serve", True, True)
    ]
    assert seen.dropped_after_reload == []  # a drop in the log's past is not a change


def test_status_table_shows_served_acceptance_in_the_tau_column(seen: Seen) -> None:
    rows = {line.split()[0]: line for line in seen.table.splitlines() if line.strip()}
    assert "1.98=" in rows["vllm-serve"] and "3.12=" in rows["sglang-serve"]
    assert "100/120" in rows["specforge-dflash"]
    assert "= acceptance length the server reports (vLLM, SGLang)" in seen.table


def test_specforge_speed_and_eta_from_its_own_stamps_in_status_and_live(seen: Seen) -> None:
    """SpecForge stamps `%m/%d/%Y %H:%M:%S`: a Step line every 10 steps, 3 s apart on its
    clock, so 10/3 steps/s both ways, and 20 steps left to `Total training steps: 120`."""
    for run in (seen.live["specforge-dflash"], seen.status["specforge-dflash"]):
        assert run["steps_per_s"] == pytest.approx(10 / 3)
    assert seen.status["specforge-dflash"]["eta_s"] == pytest.approx(6.0, abs=0.01)
    row = next(line for line in seen.table.splitlines() if line.startswith("specforge-dflash "))
    assert " 6s " in row


def test_status_says_why_a_log_without_stamps_has_no_speed(seen: Seen) -> None:
    """SpecForge's unified trainer prints no time: its speed comes from when lines arrive,
    which the console sees and one `status` snapshot does not; the table says so."""
    assert seen.status["specforge-unified"]["steps_per_s"] is None
    assert "specforge-unified: no steps/s or ETA: fewer than two" in seen.table
    assert "specforge-dflash: no steps/s" not in seen.table
