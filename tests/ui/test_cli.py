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
