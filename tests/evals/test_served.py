"""Served results: the three field formats read, imported through the CLI, and shown on the
leaderboard beside (never ranked with) the offline rows. Files come from `served_files`,
built in their writers' exact layouts."""

from __future__ import annotations

import fractions
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from dflash_tui.cli import main
from dflash_tui.core.config_parse import parse_config
from dflash_tui.evals.jobs.manager import open_eval_state
from dflash_tui.evals.results.schema import validate_results
from dflash_tui.evals.results.served.formats import detect_format, read_served
from dflash_tui.evals.results.served.record import ServedFormatError
from dflash_tui.evals.results.store import ResultsStore
from tests.evals import served_files as sf
from tests.evals.boards import BOARD_CONFIG, results_doc

CONFIG = BOARD_CONFIG


# --------------------------------------------------------------------------- readers


def test_zlab_transformers_summary_with_the_wrapped_histogram() -> None:
    text = sf.zlab_transformers(tau=6.54, speedup=4.47, block_size=16, banner="math500")
    assert "\n'17.0%']" in text  # rich wrapped the histogram, as it does in a saved log
    report = read_served(Path("logs/x.log"), text.encode())
    assert report.format == "zlab"
    (entry,) = report.entries
    assert (entry.task, entry.method, entry.tau, entry.speedup) == ("math500", "dflash", 6.54, 4.47)
    assert (entry.throughput_tok_s, entry.baseline_tok_s) == (201.5, 45.12)
    assert entry.settings == {"block_size": 16}
    assert len(entry.details["acceptance_histogram"]) == 17
    assert entry.details["acceptance_histogram"][-1] == pytest.approx(0.17)
    assert report.notes == ()


def test_zlab_task_from_task_option_else_the_file_name() -> None:
    data = sf.zlab_transformers(old=True, block_size=8).encode()  # no throughput lines yet
    (entry,) = read_served(Path("logs/gsm8k.log"), data).entries
    assert (entry.task, entry.throughput_tok_s, entry.settings["block_size"]) == ("gsm8k", None, 8)
    report = read_served(Path("logs/gsm8k.log"), data, task="gsm8k-cot")
    assert report.entries[0].task == "gsm8k-cot" and report.notes == ()
    assert "file name" in read_served(Path("logs/gsm8k.log"), data).notes[0]


def test_zlab_server_summaries_sglang_and_vllm() -> None:
    (sg,) = read_served(
        Path("a.txt"), sf.zlab_server("sglang", "humaneval", 5.321).encode()
    ).entries
    assert (sg.task, sg.method, sg.tau, sg.throughput_tok_s) == (
        "humaneval",
        "sglang",
        5.321,
        1379.12,
    )
    assert sg.settings == {"backend": "sglang", "concurrency": 1}
    assert sg.details == {
        "num_prompts": 128,
        "output_tokens": 131072,
        "spec_verify_ct": 24633,
        "latency_s": 95.0,
    }
    report = read_served(Path("b.txt"), sf.zlab_server("vllm", "mbpp", None).encode())
    assert report.entries[0].tau is None  # dflash.benchmark prints none for vLLM
    assert "no acceptance length" in report.notes[0]


def test_zlab_several_summaries_in_one_saved_log() -> None:
    text = (
        sf.zlab_transformers(tau=6.0, banner="gsm8k")
        + sf.zlab_transformers(tau=4.5, banner="humaneval")
        + sf.zlab_server("sglang", "mt-bench", 3.9)
    )
    report = read_served(Path("all.log"), text.encode())
    assert [(e.task, e.tau) for e in report.entries] == [
        ("gsm8k", 6.0),
        ("humaneval", 4.5),
        ("mt-bench", 3.9),
    ]


def test_ddtree_pt_read_as_its_make_latex_table_computes_it() -> None:
    run_data = sf.ddtree_run_data("gsm8k", budgets=(16, 64))
    report = read_served(Path("runs/x.pt"), sf.ddtree_pt(run_data))
    assert report.format == "ddtree"
    assert (report.model, report.draft) == ("Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16")
    assert [e.method for e in report.entries] == ["dflash", "ddtree tb16", "ddtree tb64"]

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs)

    responses = run_data["responses"]
    base = mean([r["baseline"].time_per_output_token for r in responses])
    for entry, key in zip(report.entries, ["dflash", "ddtree_tb16", "ddtree_tb64"], strict=True):
        tpot = mean([r[key].time_per_output_token for r in responses])
        tau = mean([mean(r[key].acceptance_lengths) for r in responses])
        assert entry.tau == pytest.approx(tau)
        assert entry.speedup == pytest.approx(base / tpot)
        assert entry.throughput_tok_s == pytest.approx(1 / tpot)
        assert entry.task == "gsm8k"
        assert entry.settings["temperature"] == 0.0 and entry.settings["block_size"] == 16
    assert [e.settings["tree_budget"] for e in report.entries] == [None, 16, 64]


class _Evil:
    """Pickles to a call of os.system (what a hostile .pt file would carry)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_ddtree_pickle_with_a_disallowed_global_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    run_data = sf.ddtree_run_data()
    run_data["responses"][0]["dflash"].extra = _Evil(marker)
    data = sf.ddtree_pt(run_data)
    assert detect_format(data) == "ddtree"
    with pytest.raises(ServedFormatError) as err:
        read_served(tmp_path / "evil.pt", data)
    assert not marker.exists()
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'evil.pt'}: refused")
    assert re.search(r"the global (posix|os)\.system", message)

    # any class beyond SimpleNamespace, harmless or not, is refused the same way
    run_data = sf.ddtree_run_data()
    run_data["args"]["temperature"] = fractions.Fraction(1, 3)  # not on the allow-list
    with pytest.raises(
        ServedFormatError, match=r"refused: it needs the global fractions\.Fraction"
    ):
        read_served(tmp_path / "odd.pt", sf.ddtree_pt(run_data))


def test_ddtree_files_of_another_shape_say_what_is_wrong(tmp_path: Path) -> None:
    import torch

    with pytest.raises(ServedFormatError, match=r"x\.pt: expected DDTree's run_data dict"):
        read_served(tmp_path / "x.pt", sf.ddtree_pt({"weight": torch.zeros(2)}))
    run_data = sf.ddtree_run_data()
    del run_data["responses"][1]["dflash"].acceptance_lengths
    with pytest.raises(
        ServedFormatError, match=r"responses\[1\]\['dflash'\]: no 'acceptance_lengths'"
    ):
        read_served(tmp_path / "y.pt", sf.ddtree_pt(run_data))
    with pytest.raises(ServedFormatError, match=r"z\.pt: not a torch.save file"):
        read_served(tmp_path / "z.pt", b"not torch", "ddtree")
    truncated = sf.ddtree_pt()[:-200]  # lost its zip directory
    with pytest.raises(ServedFormatError, match=r"t\.pt: not a"):
        read_served(tmp_path / "t.pt", truncated, "ddtree")


def test_specforge_bench_eagle3_json() -> None:
    report = read_served(
        Path("results/results_20260101_000000.jsonl"), sf.specforge_json().encode()
    )
    assert report.format == "specforge"
    assert report.draft == "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"
    by_task = {e.task: e for e in report.entries}
    assert list(by_task) == ["mtbench", "gsm8k"]  # the steps-0 baselines are not rows
    gsm = by_task["gsm8k"]
    assert gsm.tau == pytest.approx((3.6 + 3.7) / 2)  # two runs averaged, as print_results does
    base = (160.0 + 161.0) / 2
    spec = (160.0 * 3.6 * 0.8 + 160.0 * 3.6 * 0.8 + 1) / 2
    assert gsm.throughput_tok_s == pytest.approx(spec)
    assert gsm.speedup == pytest.approx(spec / base)
    assert gsm.settings == {"batch_size": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4}
    assert gsm.details["accuracy"] == pytest.approx(0.8)

    external = read_served(
        Path("r.json"), sf.specforge_json(skip_launch_server=True, model=False).encode()
    )
    assert {e.method for e in external.entries} == {"external server"}
    assert all(e.speedup is None for e in external.entries) and external.draft is None
    assert "--skip-launch-server" in external.notes[0]


def test_formats_are_detected_by_content_not_by_name() -> None:
    assert detect_format(sf.ddtree_pt()) == "ddtree"
    assert detect_format(sf.specforge_json().encode()) == "specforge"
    assert detect_format(sf.zlab_server().encode()) == "zlab"
    assert detect_format(b"step 10 loss 1.2\n") is None
    assert detect_format(json.dumps(results_doc("a", 3.0, 0.3)).encode()) is None
    with pytest.raises(ServedFormatError, match="dflash-eval/1 offline result"):
        read_served(Path("eval_results.json"), json.dumps(results_doc("a", 3.0, 0.3)).encode())
    ddtree_log = (
        "=" * 56 + "\nRunning Benchmark: dataset=gsm8k max_samples=128 model=Qwen/Qwen3-8B "
        "draft=z-lab/Qwen3-8B-DFlash-b16 mode=sdpa\n" + "=" * 56 + "\n100%|####| 16/16\n"
    )
    with pytest.raises(ServedFormatError, match=r"x\.log: a DDTree benchmark console log"):
        read_served(Path("x.log"), ddtree_log.encode())
    with pytest.raises(ServedFormatError, match=r"gsm8k\.log: no dflash\.benchmark summary"):
        read_served(Path("gsm8k.log"), b"100%|####| 16/16\n", "zlab")
    with pytest.raises(ServedFormatError, match=r"r\.json: 'gsm8k': expected a list of configs"):
        read_served(Path("r.json"), b'{"gsm8k": [{"metrics": [{}]}]}', "specforge")


# --------------------------------------------------------------------------- CLI and leaderboard


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "hosts.toml").write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DFLASH_TUI_CONFIG", raising=False)
    (tmp_path / "gsm8k.log").write_text(sf.zlab_transformers(banner="gsm8k"))
    (tmp_path / "run.pt").write_bytes(sf.ddtree_pt())
    (tmp_path / "results_20260101_000000.jsonl").write_text(sf.specforge_json())
    return tmp_path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def add_offline(workdir: Path, name: str, tau: float, at: float) -> None:
    config = parse_config(CONFIG, workdir / "hosts.toml")
    conn = open_eval_state(config.console.state_dir)
    try:
        doc = results_doc(name, tau, 0.4)
        ResultsStore(config.console.results_dir, conn).add(
            validate_results(doc),
            json.dumps(doc).encode(),
            suite="coding10",
            checkpoint=name,
            source="job",
            created_at=at,
            collected_at=at,
            job_id=f"job-{name}",
        )
    finally:
        conn.close()


def test_import_each_format_then_again_changes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = ["gsm8k.log", "run.pt", "results_20260101_000000.jsonl"]
    code, out, err = cli(capsys, "import", *files, "--checkpoint", "zlab", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["errors"] == []
    assert [i["format"] for i in doc["imported"]] == ["zlab", "ddtree", "specforge"]
    assert all(i["stored"] and i["checkpoint"] == "zlab" for i in doc["imported"])
    ddtree = doc["imported"][1]
    assert (
        ddtree["sha256"]
        == __import__("hashlib").sha256((workdir / "run.pt").read_bytes()).hexdigest()
    )
    stored = workdir / "results" / ddtree["dir"]
    assert (stored / "run.pt").read_bytes() == (workdir / "run.pt").read_bytes()
    meta = json.loads((stored / "meta.json").read_text())
    assert meta["kind"] == "served" and meta["source"] == str(workdir / "run.pt")
    assert [e["settings"]["tree_budget"] for e in meta["entries"]] == [None, 16, 64]

    code, out, err = cli(capsys, "import", *files, "--checkpoint", "zlab")
    assert code == 0, err
    assert out.count("already stored") == 3
    code, out, _ = cli(capsys, "leaderboard", "coding10", "--json")
    assert len(json.loads(out)["served"]) == 1 + 3 + 2  # zlab + DDTree methods + SpecForge


def test_import_replace_files_it_under_another_checkpoint(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "import", "gsm8k.log", "--checkpoint", "zlab")[0] == 0
    code, _, err = cli(
        capsys, "import", "gsm8k.log", "--checkpoint", "other", "--suite", "coding10"
    )
    assert code == 0 and err.count("names no dataset") == 0  # other suite: stored again
    code, _, err = cli(capsys, "import", "gsm8k.log", "--checkpoint", "zz", "--suite", "coding10")
    assert code == 0 and "already imported for other" in err
    code, out, _ = cli(
        capsys,
        "import",
        "gsm8k.log",
        "--checkpoint",
        "zz",
        "--suite",
        "coding10",
        "--replace",
        "--json",
    )
    assert code == 0 and json.loads(out)["imported"][0]["checkpoint"] == "zz"
    copies = sorted(
        p.parent.name for p in (workdir / "results/served/coding10").glob("*/gsm8k.log")
    )
    assert [c.split("__")[0] for c in copies] == ["zz"]  # the replaced import's copy is gone
    board = json.loads(cli(capsys, "leaderboard", "coding10", "--json")[1])
    assert sorted(r["checkpoint"] for r in board["served"]) == ["zlab", "zz"]
    # filed under no suite and under coding10 for the same checkpoint: one row
    assert cli(capsys, "import", "gsm8k.log", "--checkpoint", "zlab", "--suite", "coding10")[0] == 0
    board = json.loads(cli(capsys, "leaderboard", "coding10", "--json")[1])
    assert sorted(r["checkpoint"] for r in board["served"]) == ["zlab", "zz"]


def test_import_bad_files_and_usage(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "notes.txt").write_text("nothing to see\n")
    (workdir / "eval_results.json").write_text(json.dumps(results_doc("a", 3.0, 0.3)))
    code, out, err = cli(
        capsys, "import", "notes.txt", "eval_results.json", "gsm8k.log", "--checkpoint", "zlab"
    )
    assert code == 1
    assert "stored  gsm8k.log" in out  # the good file still goes in
    assert "error: notes.txt: not a served-results file" in err
    assert "error: eval_results.json: a dflash-eval/1 offline result" in err
    code, _, err = cli(capsys, "import", "run.pt", "--checkpoint", "zlab", "--format", "specforge")
    assert code == 1 and "run.pt: not a JSON object" in err

    assert cli(capsys, "import", "missing.pt", "--checkpoint", "zlab")[0] == 2
    code, _, err = cli(capsys, "import", "run.pt", "--checkpoint", "zlab", "--suite", "codnig10")
    assert code == 2 and "no suite 'codnig10'" in err and "coding10" in err
    code, _, err = cli(capsys, "import", "run.pt", "--checkpoint", "mystery")
    assert code == 2 and "pass --suite SUITE" in err
    with pytest.raises(SystemExit) as exit_:
        main(["import", "run.pt"])  # --checkpoint is required
    assert exit_.value.code == 2


def test_leaderboard_shows_served_rows_beside_offline_rows_never_in_their_ranking(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_offline(workdir, "zlab", 4.2, 1000.0)
    add_offline(workdir, "step4000", 3.1, 2000.0)
    assert cli(capsys, "import", "run.pt", "--checkpoint", "step4000")[0] == 0
    assert cli(capsys, "import", "gsm8k.log", "--checkpoint", "zlab")[0] == 0
    code, out, _ = cli(capsys, "leaderboard", "coding10", "--json")
    assert code == 0
    board = json.loads(out)
    # offline ranking: by tau_top1 of the offline results only (DDTree's 8.33 changes nothing)
    assert [r["checkpoint"] for r in board["rows"]] == ["zlab", "step4000"]
    assert {r["kind"] for r in board["rows"]} == {"offline"}
    assert all("tau" not in r["metrics"] for r in board["rows"])
    served = board["served"]
    assert {r["kind"] for r in served} == {"served"}
    # by task, then in the board's checkpoint order
    assert [(r["task"], r["checkpoint"], r["method"]) for r in served] == [
        ("gsm8k", "zlab", "dflash"),
        ("gsm8k", "step4000", "dflash"),
        ("gsm8k", "step4000", "ddtree tb16"),
        ("gsm8k", "step4000", "ddtree tb64"),
    ]
    assert served[0]["tau"] == 6.54 and served[0]["format"] == "zlab"
    assert served[2]["settings"]["tree_budget"] == 16 and served[2]["source"].endswith("run.pt")

    code, out, _ = cli(capsys, "leaderboard", "coding10")
    offline, _, served_text = out.partition("-- coding10 / served: tau from real decoding")
    assert "6.54" not in offline and "SERVED TAU" not in offline
    lines = served_text.splitlines()
    assert lines[1].split() == [
        "CHECKPOINT",
        "TASK",
        "METHOD",
        "SERVED",
        "TAU",
        "TOK/S",
        "SPEEDUP",
        "SETTINGS",
        "FROM",
    ]
    assert lines[2].split()[:4] == ["zlab", "gsm8k", "dflash", "6.54"]
    assert "temp 0.0, block 16, tree 64" in served_text


def test_served_results_filed_under_a_suite_of_their_own_get_a_board(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = workdir / "hosts.toml"
    config.write_text(CONFIG)
    assert (
        cli(
            capsys,
            "import",
            "results_20260101_000000.jsonl",
            "--checkpoint",
            "eagle",
            "--suite",
            "coding10",
        )[0]
        == 0
    )
    boards = json.loads(cli(capsys, "leaderboard", "--json")[1])["suites"]
    assert [b["suite"] for b in boards] == ["coding10"]
    assert [r["checkpoint"] for r in boards[0]["served"]] == ["eagle", "eagle"]
    assert [r["checkpoint"] for r in boards[0]["rows"]] == ["zlab"]  # never an offline row


async def test_the_console_session_gives_each_board_its_served_rows(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dflash_tui.console.session import ConsoleSession
    from dflash_tui.core.config_parse import load_config

    add_offline(workdir, "zlab", 4.2, 1000.0)
    assert cli(capsys, "import", "run.pt", "--checkpoint", "zlab")[0] == 0
    session = ConsoleSession(load_config(workdir / "hosts.toml"), auto_eval=False)
    session._start_evals()  # what start() does, without connecting to any host
    try:
        boards = session.leaderboards()
        assert [b.suite for b in boards] == ["coding10"]
        served = session.served(boards)
        assert [r.entry.method for r in served["coding10"].rows] == [
            "dflash",
            "ddtree tb16",
            "ddtree tb64",
        ]
        assert served["coding10"].rows[0].checkpoint == "zlab"
    finally:
        await session.stop()


def test_served_rows_of_a_checkpoint_no_board_lists_still_show(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "import", "gsm8k.log", "--checkpoint", "zlab")[0] == 0
    # the config no longer names zlab (and it has no offline result): its rows stay visible
    (workdir / "hosts.toml").write_text(CONFIG.replace('name = "zlab"', 'name = "zlab2"'))
    doc = json.loads(cli(capsys, "leaderboard", "--json")[1])
    assert doc["suites"][0]["served"] == []
    assert [(r["checkpoint"], r["tau"]) for r in doc["served_on_no_board"]] == [("zlab", 6.54)]
    out = cli(capsys, "leaderboard")[1]
    assert "-- no board / served: tau from real decoding" in out


def test_two_processes_importing_the_same_file_store_it_once(tmp_path: Path) -> None:
    from dflash_tui.core.state import open_state
    from dflash_tui.evals.results.served.store import ServedStore

    data = sf.zlab_transformers(banner="gsm8k").encode()
    report = read_served(Path("gsm8k.log"), data)
    first = ServedStore(tmp_path / "results", open_state(tmp_path / "state"))
    second = ServedStore(tmp_path / "results", open_state(tmp_path / "state"))
    checks = iter([None])  # the second one looked before the first one stored it
    real = second._existing
    second._existing = lambda suite, sha: next(checks, None) or real(suite, sha)  # type: ignore[method-assign]
    kw: dict[str, Any] = dict(source=Path("gsm8k.log"), suite=None, now=1.0)
    assert first.add(report, data, checkpoint="a", **kw).stored
    outcome = second.add(report, data, checkpoint="b", **kw)
    assert not outcome.stored and outcome.checkpoint == "a"
    assert [r.checkpoint for r in first.results()] == ["a"]
    assert [p.name.split("__")[0] for p in (tmp_path / "results/served/-").iterdir()] == ["a"]
