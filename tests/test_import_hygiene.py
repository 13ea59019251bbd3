"""The core never loads Textual; the harness loads nothing of the package (checked in fresh interpreters)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import dflash_tui

CORE = sorted(
    m.name
    for m in pkgutil.walk_packages(dflash_tui.__path__, "dflash_tui.")
    if not m.name.startswith("dflash_tui.ui") and m.name != "dflash_tui.__main__"
)


def _modules_after_import(names: list[str]) -> set[str]:
    code = "import importlib, sys\nfor n in sys.argv[1:]: importlib.import_module(n)\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_core_modules_do_not_load_textual() -> None:
    assert "dflash_tui.cli" in CORE and "dflash_tui.remote.pool" in CORE
    loaded = _modules_after_import(CORE)
    assert not {m for m in loaded if m.split(".")[0] in ("textual", "textual_plotext", "plotext")}


def test_cli_help_does_not_load_textual_or_torch() -> None:
    code = "import sys\nfrom dflash_tui.cli import build_parser\nbuild_parser()\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr  # an import crash must not read as "nothing loaded"
    loaded = set(out.stdout.split())
    assert "textual" not in loaded and "torch" not in loaded


@pytest.mark.parametrize("program", ["harness", "cachebuild"])
def test_shipped_programs_load_only_themselves_stdlib_torch_and_safetensors(program: str) -> None:
    """What runs on GPU hosts with nothing else of the package: every module of it, in a
    fresh interpreter, loads no other module of ours (the parent packages' empty
    __init__ files aside) and no SSH or UI library."""
    prefix = f"dflash_tui.shipped.{program}"
    modules = [
        m.name
        for m in pkgutil.walk_packages(dflash_tui.__path__, "dflash_tui.")
        if m.name == prefix or m.name.startswith(prefix + ".")
    ]
    assert len(modules) > 3, modules  # every module, not the empty __init__
    loaded = _modules_after_import(modules)
    ours = {m for m in loaded if m.startswith("dflash_tui")}
    strangers = (
        ours
        - {"dflash_tui", "dflash_tui.shipped"}
        - {m for m in ours if m == prefix or m.startswith(prefix + ".")}
        - {m for m in ours if m.startswith("dflash_tui.shipped.common")}
    )
    assert not strangers, strangers
    third_party = (
        {m.split(".")[0] for m in loaded}
        - set(sys.stdlib_module_names)
        - {"torch", "safetensors", "dflash_tui"}
    )
    # torch's own optional dependencies may appear; nothing of ours, and no SSH or UI library.
    assert not third_party & {"asyncssh", "textual", "plotext", "rich", "cryptography"}
