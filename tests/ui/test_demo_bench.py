"""`S` on the demo's leaderboard, as a newcomer presses it (docs/evals.md "Served bench jobs").

The real console and session on the demo cluster: the bench job runs the served bench
program on the demo's eval host against the demo's engine (demo/served_engine.py), is
collected, and the leaderboard's served columns fill. A suite that names no target is
refused when `S` is answered, as `dflash-tui bench` refuses it, before anything is copied.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Static

from dflash_tui.console.session import ConsoleSession
from dflash_tui.core.config_parse import load_config
from dflash_tui.demo import assets as demo_assets
from dflash_tui.demo.cluster import DemoCluster
from dflash_tui.evals.jobs.preflight import REFUSED
from dflash_tui.ui.app import DflashApp
from dflash_tui.ui.panes.leaderboard import LeaderboardPane
from dflash_tui.ui.screens.confirm import ConfirmScreen
from tests.waiting import pilot_until

BENCH_S = 240.0  # two engine starts and 20 requests on a loaded CPU: about 20 s idle


def console(config_path: Path, tmp_path: Path) -> tuple[ConsoleSession, DflashApp]:
    session = ConsoleSession(load_config(config_path))
    app = DflashApp(session, bell=False)
    app.animation_level = "none"
    app.error_desk.log_path = tmp_path / "console-errors.log"
    return session, app


def cells(pane: LeaderboardPane, checkpoint: str) -> dict[str, str]:
    """The leaderboard row of `checkpoint`, by column label ({} while it is not shown)."""
    board = pane.board
    row = next((r for r in board.rows if r.checkpoint == checkpoint), None) if board else None
    if row is None or row.key not in pane.table.rows:
        return {}
    labels = [str(c.label) for c in pane.table.columns.values()]
    return dict(zip(labels, (str(c) for c in pane.table.get_row(row.key)), strict=True))


async def select(pilot, pane: LeaderboardPane, suite: str, checkpoint: str) -> None:
    """Show `suite`'s leaderboard (`s` until it is there) and put the cursor on `checkpoint`."""
    await pilot.press("5")
    for _ in range(4):
        board = pane.board
        if board is not None and board.suite == suite:
            break
        await pilot.press("s")
        await pilot.pause()
    await pilot_until(
        pilot, lambda: cells(pane, checkpoint), f"{checkpoint} on {suite}'s leaderboard"
    )
    key = next(r.key for r in pane.board.rows if r.checkpoint == checkpoint)
    pane.table.move_cursor(row=pane.table.get_row_index(key))
    await pilot.pause()
    assert pane.selected_row.checkpoint == checkpoint


# its budget follows its work: the bench's own deadline, then the board's refresh
@pytest.mark.timeout(BENCH_S + 120)
async def test_s_on_the_demo_leaderboard_fills_the_served_columns(
    demo_cluster: DemoCluster, tmp_path: Path
) -> None:
    assets = demo_cluster.wait_for_eval_assets()
    assert assets is not None and assets.ok, assets
    session, app = console(demo_cluster.config_path, tmp_path)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            pane = app.screen.query_one(LeaderboardPane)
            await select(pilot, pane, demo_assets.SUITE_NAME, "zlab")
            assert cells(pane, "zlab").get("served tau") is None  # no served bench yet
            await pilot.press("S")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")

            def bench():
                return next((j for j in session.jobs() if j.kind == "bench"), None)

            job = await pilot_until(pilot, bench, "the bench job queued by S")
            assert not job.terminal, job.error

            def shown_or_failed() -> bool:
                job = bench()
                failed = job is not None and job.terminal and job.state != "done"
                return failed or cells(pane, "zlab").get("served tau", "-") != "-"

            await pilot_until(
                pilot,
                shown_or_failed,
                "zlab's served tau on the leaderboard",
                timeout=BENCH_S,
                seen=lambda: (bench(), cells(pane, "zlab")),
            )
            assert bench().state == "done", bench().error
            row = cells(pane, "zlab")
            # real counts: the engine drafts with zlab, the target the suite's cache holds
            # the speedup with its interval over the timed rounds: "2.31x [1.90-2.80]"
            speedup = re.match(r"(\d+\.\d+)x \[\d+\.\d+-\d+\.\d+\]", row["speedup"])
            assert float(row["served tau"]) > 2.0 and speedup, row
            assert float(speedup.group(1)) > 1.0
            # tau_greedy is known once the baseline's own eval ran (the demo starts it):
            # served within max_tokens equals it, so no gap is flagged
            if row.get("served - greedy", "-") != "-":
                assert not row["served - greedy"].endswith("!"), row
            caption = str(app.screen.query_one("#served-caption", Static).render())
            assert caption.strip(), "the served section under the board has its caption"
            errors = [f"{r.where}: {r.error!r}" for r in app.error_desk.reported]
            assert not errors
    finally:
        await session.stop()


def no_target_suite(cluster: DemoCluster) -> Path:
    """A config with suite `no-target`: the demo's cache without its target, named by nothing."""
    evalbox = cluster.host_root("evalbox")
    src, dst = evalbox / demo_assets.SUITE_DIR, evalbox / "eval" / "no-target"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("target"))
    manifest = json.loads((dst / "manifest.json").read_text())
    del manifest["target"]
    (dst / "manifest.json").write_text(json.dumps(manifest))
    text = cluster.config_path.read_text().split("[[runs]]", 1)[0]  # no trainers: no auto-eval
    tail = cluster.config_path.read_text().split("[[checkpoints]]", 1)[1]
    config = cluster.base / "no-target.toml"
    suite = '\n[[suites]]\nname = "no-target"\nhost = "evalbox"\ncache = "eval/no-target"\n'
    config.write_text(text + "[[checkpoints]]" + tail + suite)
    return config


async def test_s_on_a_suite_without_a_target_is_refused_before_the_job_is_queued(
    demo_cluster: DemoCluster, tmp_path: Path
) -> None:
    assets = demo_cluster.wait_for_eval_assets()
    assert assets is not None and assets.ok, assets
    config = no_target_suite(demo_cluster)
    session, app = console(config, tmp_path)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            pane = app.screen.query_one(LeaderboardPane)
            await select(pilot, pane, "no-target", "zlab")
            await pilot.press("S", "y")
            await app.workers.wait_for_complete()
            jobs = [j for j in session.jobs() if j.suite == "no-target"]
            assert [(j.kind, j.state) for j in jobs] == [("bench", "failed")]
            assert jobs[0].error.startswith(f"{REFUSED}: cache evalbox:eval/no-target names no")
            assert jobs[0].remote_dir is None and jobs[0].remote_checkpoint_path is None
            said = [(n.severity, str(n.message)) for n in app._notifications]
            assert any(
                severity == "error" and "names no target model" in message
                for severity, message in said
            ), said
            assert not any("queued" in message or "job " in message for _, message in said), said
    finally:
        await session.stop()
    # the CLI refuses it the same way: exit 2, the reason and the fix
    cli = subprocess.run(
        [sys.executable, "-m", "dflash_tui", "--config", str(config), "bench", "zlab", "no-target"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2, cli.stdout + cli.stderr
    assert "names no target model" in cli.stdout + cli.stderr
