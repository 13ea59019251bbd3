"""The hosts pane names who holds each GPU: a run (by pid or session), an eval job (its
session), or the process's command; and flags an idle GPU while a run is alive."""

from __future__ import annotations

import dataclasses

from dflash_tui.monitor.gpu import GpuProcess
from dflash_tui.ui.panes.hosts import HostsPane
from tests.ui.fixture_session import FixtureSession
from tests.waiting import pilot_until


async def test_gpu_lines_name_their_owners_and_flag_idle_ones(make_app) -> None:
    session = FixtureSession()
    evalbox = session._hosts["evalbox"]
    stranger = GpuProcess(9001, 512.0, 9001, "/opt/conda/bin/python serve.py")
    gpu = dataclasses.replace(evalbox.gpus[0], processes=(*evalbox.gpus[0].processes, stranger))
    session._hosts["evalbox"] = dataclasses.replace(evalbox, gpus=(gpu,))
    app = make_app(session)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("4")
        pane = app.screen.query_one(HostsPane)
        await pilot_until(pilot, lambda: "evalbox" in pane.shown_text, "the hosts drawn")
        lines = pane.shown_text.splitlines()

        def gpu_line(host: str, index: int) -> str:
            start = next(i for i, line in enumerate(lines) if line.startswith(host))
            return next(line for line in lines[start:] if line.startswith(f"  {index:>2} "))

        # slammed5's worker is in slammed5's session; wide-lr's own pid holds GPU 6.
        assert "slammed5 pid 4300 68.9 GiB" in gpu_line("trainbox", 0)
        assert "throttled: power cap" in gpu_line("trainbox", 3)
        assert "wide-lr pid 4243" in gpu_line("trainbox", 6)
        assert "idle while slammed5 is alive" in gpu_line("trainbox", 7)
        assert "59C  612/700W" in gpu_line("trainbox", 0)
        # The eval job's harness (its session is the job's pid), and a process of no one's.
        eval_line = gpu_line("evalbox", 0)
        assert "eval ab12 pid 7002" in eval_line and "python pid 9001 512 MiB" in eval_line
        assert "idle" not in eval_line  # no run alive on evalbox
