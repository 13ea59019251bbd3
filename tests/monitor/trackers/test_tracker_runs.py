"""Runs whose only source is a tracker: `status --json`, and the monitor through a cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dflash_tui.cli import main
from dflash_tui.core.config_parse import load_config
from dflash_tui.monitor import Monitor, MonitorOptions
from dflash_tui.remote import HostPool
from tests.monitor.trackers.writers import record_ends, specforge_scalars, write_events
from tests.testbed import SshdHost
from tests.waiting import async_wait_until

STEPS = 40
SCALARS = sum(len(specforge_scalars(s)) for s in range(STEPS))


def _run_toml(runs: Path) -> str:
    return f'[[runs]]\nname = "sf"\nhost = "a"\ntensorboard = "{runs}"\n'


def test_status_json_of_a_specforge_tensorboard_run(
    sshd: SshdHost, write_config, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "output" / "runs"  # SpecForge: TensorBoard under output_dir/runs
    write_events(runs, ((s, specforge_scalars(s)) for s in range(STEPS)))
    config = write_config({"a": sshd}, extra=_run_toml(runs))
    code = main(["status", "--json", "--config", str(config)])
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert code == 0, run
    assert run["log"] is None and run["state"] == "alive"
    assert run["step"] == STEPS - 1
    assert run["loss"]["last"] == pytest.approx(2.0 - 39 / 100)
    assert run["acc"]["last"] == pytest.approx(0.3 + 39 / 1000)
    assert run["eval"] == {"loss": pytest.approx(1.9 - 0.3), "acc": 0.5, "step": 30}
    assert run["trainer_tau"] == {
        "value": pytest.approx(1.3),
        "source": "eval/simulated_acc_len",
        "step": 30,
    }
    assert run["tau"]["value"] is not None  # the console's own, beside the trainer's
    tracker = run["tracker"]
    assert (tracker["records"], tracker["scalars"], tracker["corrupt"]) == (
        SCALARS + 1,  # and the file-version record
        SCALARS,
        0,
    )
    assert "train/acc_2" in tracker["names"]
    last = run["acc_per_position_steps"][-1]
    assert last["step"] == 39 and last["values"] == pytest.approx([0.8, 0.6, 0.4])

    code = main(["status", "--config", str(config)])
    table = capsys.readouterr().out
    assert "TRAINER_TAU" in table and "eval/simulated_acc_len at step 30" in table


async def test_monitor_follows_through_a_cut_mid_record(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    source = write_events(tmp_path / "w", ((s, specforge_scalars(s)) for s in range(STEPS)))
    data = source.read_bytes()
    ends = record_ends(data)
    runs = tmp_path / "output" / "runs"
    runs.mkdir(parents=True)
    followed = runs / source.name
    half = ends[len(ends) // 2] + 7  # 7 bytes into a record
    followed.write_bytes(data[:half])
    config = load_config(write_config({"a": sshd}, extra=_run_toml(runs), refresh_s=0.5))
    async with HostPool(config) as pool:
        monitor = Monitor(config, pool, options=MonitorOptions(tracker_poll_s=0.1))
        await monitor.start()
        try:
            view = lambda: monitor.run_view("sf")  # noqa: E731
            await async_wait_until(
                lambda: view().tracker and view().tracker.records == len(ends) // 2 + 1,
                "the first half read",
                seen=lambda: view().tracker,
            )
            sshd.kill_sessions()  # cut with 7 bytes of a record pending
            followed.open("ab").write(data[half:])
            await async_wait_until(
                lambda: view().tracker.records == len(ends),
                "the rest read after the cut",
                seen=lambda: view().tracker,
            )
            tracker = view().tracker
            assert (tracker.records, tracker.scalars, tracker.corrupt) == (len(ends), SCALARS, 0)
            assert view().history_points == STEPS and view().step == STEPS - 1
            assert any(n.kind == "disconnected" for n in view().notices)
            assert monitor.scalar_series("sf", "train/acc_1")[-1] == (STEPS - 1, pytest.approx(0.6))
        finally:
            await monitor.stop()
