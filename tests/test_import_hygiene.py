"""The core never loads Textual; the harness loads nothing of the package (checked in fresh interpreters)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

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


def test_harness_loads_only_stdlib_torch_and_safetensors() -> None:
    harness = [
        m.name
        for m in pkgutil.walk_packages(dflash_tui.__path__, "dflash_tui.")
        if m.name.startswith("dflash_tui.evals.harness")
    ]
    assert "dflash_tui.evals.harness.rules" in harness  # every module, not the empty __init__
    loaded = _modules_after_import(harness)
    ours = {m for m in loaded if m.startswith("dflash_tui")}
    assert all(
        m == "dflash_tui" or m.startswith(("dflash_tui.evals.harness", "dflash_tui.evals"))
        for m in ours
    ), ours
    assert "dflash_tui.evals.synthetic" not in ours
    third_party = (
        {m.split(".")[0] for m in loaded}
        - set(sys.stdlib_module_names)
        - {"torch", "safetensors", "dflash_tui"}
    )
    # torch's own optional dependencies may appear; nothing of ours, and no SSH or UI library.
    assert not third_party & {"asyncssh", "textual", "plotext", "rich", "cryptography"}
