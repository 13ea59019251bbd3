"""`dflash-tui` alone and `dflash-tui tui` open the console; a bad `[keys]` table is a
config error (exit 2, file:line: key: message) before anything is drawn."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_tui.cli import build_parser, main
from dflash_tui.commands import tui
from tests.ui.fixture_session import CONFIG_TEXT


def test_no_command_opens_the_console() -> None:
    assert build_parser().parse_args([]).default_handler is tui.run
    assert build_parser().parse_args(["tui"]).handler is tui.run


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ('"logs.folow" = "F"', 'keys.logs.folow: unknown action; did you mean "logs.follow"?'),
        ('"app.quit" = "alt+q"', 'keys.app.quit: "alt+q" does not reach the console through tmux'),
        ('"app.help" = "ctrl+1"', 'keys.app.help: "ctrl+1": only ctrl+letter survives tmux'),
    ],
)
def test_bad_keymap_is_a_config_error_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], keys: str, message: str
) -> None:
    path = tmp_path / "hosts.toml"
    text = CONFIG_TEXT + "\n[keys]\n" + keys + "\n"
    path.write_text(text)
    line = text.splitlines().index(keys) + 1
    assert main(["tui", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}: {message}" in err


class _Results:
    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], list[object]] = {}

    def results(self, suite: str | None = None, checkpoint: str | None = None) -> list[object]:
        return self.stored.get((suite or "", checkpoint or ""), [])

    def baseline_override(self, suite: str) -> str | None:
        return None


class _Manager:
    """The JobManager calls `evaluate_missing_baselines` makes."""

    def __init__(self) -> None:
        self.results = _Results()
        self.started: list[tuple[str, str]] = []
        self._jobs: list[object] = []

    def jobs(self, **_: object) -> list[object]:
        return list(self._jobs)

    async def start_eval(self, checkpoint: str, suite: str) -> object:
        import types

        self.started.append((checkpoint, suite))
        job = types.SimpleNamespace(
            id=f"j{len(self.started)}", suite=suite, checkpoint=checkpoint, state="queued"
        )
        self._jobs.append(job)
        return job


async def test_the_demo_evaluates_its_baseline_once_its_eval_assets_exist() -> None:
    import asyncio
    import types

    from dflash_tui.commands.demo import evaluate_baseline_when_ready
    from dflash_tui.console.session import ConsoleSession
    from dflash_tui.core.config_parse import parse_config

    config = parse_config(
        CONFIG_TEXT
        + '\n[[checkpoints]]\nname = "zlab"\nhost = "evalbox"\npath = "models/zlab"\nbaseline = true\n'
        '\n[[suites]]\nname = "coding10"\nhost = "evalbox"\ncache = "eval/cache"\n',
        Path("hosts.toml"),
    )
    session = ConsoleSession(config)
    manager = session._manager = _Manager()
    cluster = types.SimpleNamespace(build_eval_assets=True, eval_assets=None)
    waiting = asyncio.ensure_future(evaluate_baseline_when_ready(cluster, session, poll_s=0.01))
    await asyncio.sleep(0.05)
    assert not waiting.done() and manager.started == []  # no assets yet: nothing to evaluate
    cluster.eval_assets = types.SimpleNamespace(ok=True)
    await asyncio.wait_for(waiting, 5)
    assert manager.started == [("zlab", "coding10")]
    # Once is enough: a queued (or done) job, or a result, is not evaluated again.
    await evaluate_baseline_when_ready(cluster, session)
    assert manager.started == [("zlab", "coding10")]
    manager._jobs[0].state = "failed"  # a failed one is tried again at the next start
    await session.evaluate_missing_baselines()
    assert manager.started == [("zlab", "coding10")] * 2
    manager.results.stored[("coding10", "zlab")] = [object()]
    manager._jobs.clear()
    assert await session.evaluate_missing_baselines() == []
    # Without eval assets (no torch) the demo does not try.
    cluster = types.SimpleNamespace(
        build_eval_assets=True, eval_assets=types.SimpleNamespace(ok=False)
    )
    manager.results.stored.clear()
    await evaluate_baseline_when_ready(cluster, session)
    assert len(manager.started) == 2
