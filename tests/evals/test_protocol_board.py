"""The protocol on the board (docs/evals.md "The protocol"): benches under different
protocols are named, not ranked alike, and `leaderboard --format` prints the field's table,
one column per dataset, saying where a protocol is not z-lab's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.core.config_parse import parse_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.protocol import column_label, departures, unlike_protocol
from dflash_tui.evals.results.served import dflash_served
from dflash_tui.evals.results.served.beside import ServedBeside, unlike_settings
from dflash_tui.evals.results.served.store import ServedStore
from dflash_tui.shipped.servedbench.prompts import protocol_of
from tests.evals.boards import BOARD_CONFIG, add, results_doc

SUITES = """
[[suites]]
name = "gsm8k"
host = "gpu"
cache = "/eval/gsm8k"
[[suites]]
name = "mt-bench"
host = "gpu"
cache = "/eval/mt-bench"
[[checkpoints]]
name = "run1/step-4000"
host = "gpu"
path = "/models/run1-4000"
"""


def zlab_protocol(dataset: str, **change: Any) -> dict[str, Any]:
    """The protocol block as the served bench copies it from a `--dataset` cache."""
    return {
        "dataset": dataset,
        "config": "main" if dataset == "gsm8k" else None,
        "split": "test" if dataset == "gsm8k" else "train",
        "rows_sha256": "1" * 64,
        "formatter": {"name": "zlab-reasoning", "version": 1},
        "selection": {"way": "first", "num_prompts": 80},
        "thinking": False,
        "chat_template_sha256": "2" * 64,
        "max_new_tokens": 2048,
        "samples": 80,
        "samples_sha256": "3" * 64,
        **change,
    }


def bench_doc(task: str, tau: float, speedup: float, protocol: dict | None) -> dict[str, Any]:
    """A dflash-served/1 document as shipped/servedbench/run.py writes it."""
    row = {"requests": 80, "output_tokens": 9600, "tok_s": 400.0, "speedup": speedup}
    row |= {"baseline_tok_s": 400.0 / speedup, "drafts": 300, "accepted": 300 * (tau - 1)}
    row["served_tau"] = tau
    settings = {"engine": "vllm", "k": 15, "gpu": "H100", "temperature": 0.0}
    settings["protocol"] = protocol
    return {"format": "dflash-served/1", "settings": settings, "tasks": {task: row}, "suite": row}


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.toml"
    path.write_text(BOARD_CONFIG + SUITES)
    return path


def store_benches(path: Path, benches: list[tuple[str, str, dict[str, Any]]]) -> None:
    config = parse_config(path.read_text(), path)
    conn = open_eval_state(config.console.state_dir)
    served = ServedStore(config.console.results_dir, conn)
    for at, (checkpoint, suite, doc) in enumerate(benches, start=1):
        raw = json.dumps(doc).encode()
        report = dflash_served.read(raw, Path(f"{checkpoint}-{suite}.json"))
        served.add(report, raw, source=Path("x.json"), checkpoint=checkpoint, suite=suite, now=at)
    conn.close()


def test_each_differing_protocol_field_is_named() -> None:
    base = zlab_protocol("gsm8k")
    assert unlike_protocol([base, dict(base)]) == []
    assert unlike_protocol([base, zlab_protocol("mt-bench")]) == ["dataset"]
    assert unlike_protocol([base, zlab_protocol("gsm8k", thinking=True)]) == ["thinking"]
    assert unlike_protocol([base, zlab_protocol("gsm8k", chat_template_sha256="x")]) == ["template"]
    changed = zlab_protocol("gsm8k", max_new_tokens=512, samples_sha256="y")
    assert unlike_protocol([base, changed]) == ["max_new_tokens", "samples"]
    assert unlike_protocol([base, None]) == ["protocol"]
    assert unlike_protocol([None, None]) == []

    def bench(name: str, protocol: dict | None) -> ServedBeside:
        settings = {"engine": "vllm", "k": 15, "protocol": protocol}
        return ServedBeside(name, 4.0, 2.0, settings, None)

    rows = [bench("a", base), bench("b", zlab_protocol("gsm8k", thinking=True))]
    assert unlike_settings(rows) == ["thinking"]


def test_departures_from_zlabs_protocol() -> None:
    assert departures(zlab_protocol("gsm8k")) == []
    assert departures(zlab_protocol("gsm8k", thinking=True, max_new_tokens=512)) == [
        "thinking on",
        "max_new_tokens 512",
    ]
    assert departures(None) == ["no protocol recorded"]
    assert column_label("gsm8k", [zlab_protocol("gsm8k")]) == "gsm8k"
    assert column_label("math", [zlab_protocol("math500")]) == "math500 (math)"
    assert (
        column_label("coding10", [None]) == "coding10 [not z-lab's protocol: no protocol recorded]"
    )


def test_the_served_bench_copies_the_caches_protocol(tmp_path: Path) -> None:
    block = {
        **{k: v for k, v in zlab_protocol("gsm8k").items() if "samples" not in k},
        "sample_ids": [5, 1, 9],
        "rows_picked": [5, 1, 9],
        "source": {"data": "/data/gsm8k.parquet"},
        "rows": 1319,
    }
    (tmp_path / "manifest.json").write_text(json.dumps({"samples": [], "protocol": block}))
    got = protocol_of(tmp_path)
    assert got is not None
    assert (got["dataset"], got["thinking"], got["samples"]) == ("gsm8k", False, 3)
    assert "sample_ids" not in got and len(got["samples_sha256"]) == 64
    (tmp_path / "manifest.json").write_text(json.dumps({"samples": []}))
    assert protocol_of(tmp_path) is None  # a --prompts cache


def test_leaderboard_format_prints_checkpoint_by_dataset(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dflash_tui.cli import main

    gsm8k, mt = zlab_protocol("gsm8k"), zlab_protocol("mt-bench", max_new_tokens=512)
    store_benches(
        config_path,
        [
            ("zlab", "gsm8k", bench_doc("gsm8k", 6.57, 4.78, gsm8k)),
            ("zlab", "mt-bench", bench_doc("mt-bench", 4.28, 2.56, mt)),
            ("run1/step-4000", "gsm8k", bench_doc("gsm8k", 5.1, 3.9, gsm8k)),
        ],
    )
    args = ["leaderboard", "--format", "markdown", "--config", str(config_path)]
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines() == [
        "| checkpoint | gsm8k | mt-bench [not z-lab's protocol: max_new_tokens 512] |",
        "|---|---|---|",
        "| run1/step-4000 | 3.90x / 5.10 | - |",  # in the boards' order
        "| zlab | 4.78x / 6.57 | 2.56x / 4.28 |",
    ]
    assert main([*args[:2], "csv", *args[3:]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "checkpoint,gsm8k,mt-bench [not z-lab's protocol: max_new_tokens 512]"
    assert lines[2] == "zlab,4.78x / 6.57,2.56x / 4.28"


def test_benches_under_other_protocols_are_named_on_the_board(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dflash_tui.cli import main

    store_benches(
        config_path,
        [
            ("zlab", "gsm8k", bench_doc("gsm8k", 6.57, 4.78, zlab_protocol("gsm8k"))),
            (
                "run1/step-4000",
                "gsm8k",
                bench_doc("gsm8k", 7.9, 5.0, zlab_protocol("gsm8k", thinking=True)),
            ),
        ],
    )
    assert main(["leaderboard", "gsm8k", "--config", str(config_path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "served rows were measured with different thinking" in text, text
    assert main(["leaderboard", "--format", "markdown", "--config", str(config_path)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head == "| checkpoint | gsm8k [protocols differ: thinking] |"


def test_offline_results_under_other_protocols_are_named_on_the_board(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The harness copies the cache's protocol into eval_results.json; results on one suite
    whose caches differed (rebuilt with --thinking) get a note naming the field."""
    from dflash_tui.cli import main
    from dflash_tui.evals.results.store import ResultsStore

    config = parse_config(config_path.read_text(), config_path)
    conn = open_eval_state(config.console.state_dir)
    store = ResultsStore(config.console.results_dir, conn)
    for name, at, thinking in (("zlab", 1.0, False), ("run1/step-4000", 2.0, True)):
        doc = results_doc(name, 4.0 - at, 0.5) | {"suite": "gsm8k"}
        doc["protocol"] = zlab_protocol("gsm8k", thinking=thinking, sample_ids=[3, 1])
        assert add(store, doc, at) is not None
    conn.close()
    assert main(["leaderboard", "gsm8k", "--config", str(config_path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "results measured under different protocols (thinking differ" in text, text
    assert main(["leaderboard", "gsm8k", "--json", "--config", str(config_path)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["checkpoint"]: r["protocol"]["thinking"] for r in rows if r["protocol"]} == {
        "zlab": False,
        "run1/step-4000": True,
    }
