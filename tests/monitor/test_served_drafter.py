"""The drafter a server runs, from its command line as `ps` shows it; served tau over the
newest windows with enough drafts; a drafter path resolved to a stored checkpoint name
(docs/monitoring.md "A served drafter that collapsed")."""

from __future__ import annotations

import pytest

from dflash_tui.console.collapse import resolve_checkpoint
from dflash_tui.monitor.liveness import ProcessInfo
from dflash_tui.monitor.served_drafter import drafter_from_command, served_drafter
from dflash_tui.monitor.served_metrics import Report, recent_tau
from tests.ui.fixture_session import fixture_config


def test_vllm_and_sglang_command_lines_name_their_drafter() -> None:
    # `ps -o args=` joins argv with spaces: the JSON's own spaces stay, the quotes are gone.
    vllm = ('/usr/bin/python3 /usr/local/bin/vllm serve Qwen/Qwen3-8B --port 8000 '
            '--speculative-config {"method": "dflash", "model": "/models/dflash-step4000", '
            '"num_speculative_tokens": 15} --max-model-len 8192')  # fmt: skip
    assert drafter_from_command(vllm) == "/models/dflash-step4000"
    assert drafter_from_command(
        'vllm serve T --speculative_config={"model":"z-lab/Qwen3-8B-DFlash-b16"}'
    ) == "z-lab/Qwen3-8B-DFlash-b16"  # fmt: skip
    assert drafter_from_command("vllm serve T --speculative-config.model /m/d --port 1") == "/m/d"
    sglang = ("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B "
              "--speculative-algorithm DFLASH --speculative-draft-model-path /models/d16 "
              "--speculative-num-draft-tokens 16")  # fmt: skip
    assert drafter_from_command(sglang) == "/models/d16"
    assert drafter_from_command("--speculative-draft-model-path=/x/y") == "/x/y"
    for nothing in ("vllm serve T --port 8000", "vllm serve T --speculative-config {broken",
                    'vllm serve T --speculative-config {"method": "ngram"}'):  # fmt: skip
        assert drafter_from_command(nothing) is None


def test_the_runs_key_wins_over_the_command_line() -> None:
    procs = (ProcessInfo(1, 5, "bash run.sh"),
             ProcessInfo(2, 5, "vllm serve T --speculative-config.model /m/a"))  # fmt: skip
    assert served_drafter(None, procs) == "/m/a"
    assert served_drafter("step-4000", procs) == "step-4000"
    assert served_drafter(None, ()) is None


def report(length: float, drafts: float | None, restarted: bool = False) -> Report:
    return Report(length, None, None, drafts, None, 10.0, restarted)


def test_recent_tau_waits_for_enough_drafts_and_weighs_windows_by_them() -> None:
    assert recent_tau([report(3.0, 50)], min_drafts=200) is None
    reports = [report(4.0, 1000), report(3.0, 100), report(1.0, 100)]
    got = recent_tau(reports, min_drafts=200)
    assert got is not None and got.windows == 2 and got.drafts == 200
    assert got.tau == pytest.approx(2.0)  # 1 + (200 + 0) / 200
    # A restart ends the window: the process before it was another server.
    assert recent_tau([report(4.0, 1000), report(1.0, 50, restarted=True)], 200) is None
    # SGLang reports no drafts: its newest three intervals.
    sglang = [report(5.0, None), report(2.0, None), report(2.5, None), report(1.5, None)]
    got = recent_tau(sglang, 200)
    assert got is not None and got.drafts is None and got.tau == pytest.approx(2.0)


def test_a_drafter_path_resolves_to_the_stored_checkpoint() -> None:
    config = fixture_config(
        extra='[[checkpoints]]\nname = "served-one"\nhost = "evalbox"\npath = "/models/s1/"\n'
    )
    names = {"served-one", "slammed5/step-4000", "evalbox:/models/other", "zlab"}
    assert resolve_checkpoint("zlab", "evalbox", config, names) == "zlab"
    assert resolve_checkpoint("/models/s1", "evalbox", config, names) == "served-one"
    assert resolve_checkpoint("/models/other", "evalbox", config, names) == "evalbox:/models/other"
    found = resolve_checkpoint("/ckpt/slammed5/step-4000/", "h", config, names)
    assert found == "slammed5/step-4000"
    assert resolve_checkpoint("/models/unknown", "evalbox", config, names) is None
