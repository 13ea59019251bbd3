"""`--dataset` builds (docs/evals.md "The protocol"): the manifest's protocol block, and
`--thinking` changing what the target sees."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from dflash_tui.demo.synthetic_target import CHAT_TEMPLATE
from dflash_tui.shipped.cachebuild.datasets import rows_sha256
from dflash_tui.shipped.harness.cache import read_manifest
from tests.cachebuild import field_rows as F
from tests.cachebuild.test_cachebuild import run_build
from tests.cachebuild.tiny_target import LAYER_IDS, TinyTarget

# Qwen3's template opens an empty think block when enable_thinking is false; "w1 w1"
# stands in for it in the tiny word-level vocabulary.
THINKING_TEMPLATE = CHAT_TEMPLATE + (
    "{% if add_generation_prompt and enable_thinking is defined and enable_thinking is false %}"
    "w1 w1 {% endif %}"
)


def dataset_args(t: Path, out: Path, dataset: str, data: Path, *extra: str) -> list[str]:
    return [
        "--target", str(t), "--dataset", dataset, "--data", str(data), "--out", str(out),
        "--target-layer-ids", ",".join(map(str, LAYER_IDS)), "--max-new-tokens", "4", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def thinking_target(tiny_target: TinyTarget, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny target with a template that knows enable_thinking."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("thinking") / "target"
    shutil.copytree(tiny_target.dir, out)
    tok = AutoTokenizer.from_pretrained(str(out))
    tok.chat_template = THINKING_TEMPLATE
    tok.save_pretrained(str(out))
    return out


def prompt_ids(cache: Path) -> list[list[int]]:
    out = []
    for entry in json.loads((cache / "manifest.json").read_text())["samples"]:
        t = load_file(str(cache / entry["file"]))
        mask = t["loss_mask"].tolist()
        out.append(t["input_ids"][: mask.index(1)].tolist())
    return out


def test_gsm8k_parquet_build_records_zlabs_protocol(
    tiny_target: TinyTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = F.write_parquet(tmp_path / "test-00000-of-00001.parquet", "gsm8k", F.GSM8K)
    out = tmp_path / "cache"
    args = dataset_args(tiny_target.dir, out, "gsm8k", data, "--max-samples", "3")
    code, events = run_build(capsys, *args)
    assert code == 0, events
    manifest = json.loads((out / "manifest.json").read_text())
    protocol = manifest["protocol"]
    template_sha = hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest()
    # random.seed(0); random.shuffle over 4 rows -> [2, 0, 1, 3]: keep 3
    assert protocol["sample_ids"] == protocol["rows_picked"] == [2, 0, 1]
    assert protocol == {
        "dataset": "gsm8k",
        "path": "openai/gsm8k",
        "config": "main",
        "split": "test",
        "source": {"data": str(data.resolve())},
        "rows": 4,
        "rows_sha256": rows_sha256(F.GSM8K),
        "formatter": {"name": "zlab-reasoning", "version": 1},
        "selection": {"way": "shuffle", "seed": 0, "max_samples": 3},
        "sample_ids": [2, 0, 1],
        "rows_picked": [2, 0, 1],
        "temperature": 0.0,
        "thinking": False,
        "chat_template_sha256": template_sha,
        "max_new_tokens": 4,
    }
    assert [s["name"] for s in manifest["samples"]] == ["gsm8k"] * 3  # one task: the dataset
    assert [s["id"] for s in manifest["samples"]] == [2, 0, 1]
    assert len(read_manifest(out).samples) == 3  # the harness reads it

    # and an eval on the cache carries the protocol with its numbers
    from dflash_tui.demo.synthetic import write_drafter
    from dflash_tui.shipped.harness import cli as harness_cli

    drafter = write_drafter(
        tmp_path / "drafter", vocab_size=64, target_layer_ids=LAYER_IDS, block_size=4
    )
    results = tmp_path / "eval_results.json"
    argv = ["--drafter", str(drafter), "--cache", str(out), "--out", str(results)]
    assert harness_cli.main([*argv, "--device", "cpu"]) == 0
    assert json.loads(results.read_text())["protocol"] == protocol


def test_mt_bench_saved_folder_build_sends_the_first_turn(
    tiny_target: TinyTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoTokenizer

    data = F.write_saved(tmp_path / "mt_bench_prompts", "mt-bench", F.MT_BENCH, "train")
    out = tmp_path / "cache"
    args = dataset_args(tiny_target.dir, out, "mt-bench", data, "--num-prompts", "2")
    code, events = run_build(capsys, *args)
    assert code == 0, events
    protocol = json.loads((out / "manifest.json").read_text())["protocol"]
    assert protocol["selection"] == {"way": "first", "num_prompts": 2}
    assert protocol["sample_ids"] == [81, 82] and protocol["formatter"]["name"] == "zlab-first-turn"
    tok = AutoTokenizer.from_pretrained(str(tiny_target.dir))
    first = [r["prompt"][0] for r in F.MT_BENCH[:2]]
    want = [
        tok(
            tok.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            ),
            add_special_tokens=False,
        )["input_ids"]
        for text in first
    ]
    assert prompt_ids(out) == want


def test_thinking_changes_what_the_target_sees(
    thinking_target: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = F.write_jsonl(tmp_path / "gsm8k.jsonl", F.GSM8K[:1])
    ids = {}
    for thinking in (False, True):
        out = tmp_path / f"cache-{thinking}"
        extra = ["--thinking"] if thinking else []
        code, events = run_build(capsys, *dataset_args(thinking_target, out, "gsm8k", data, *extra))
        assert code == 0, events
        assert json.loads((out / "manifest.json").read_text())["protocol"]["thinking"] is thinking
        ids[thinking] = prompt_ids(out)[0]
    # off (z-lab's default): the template's empty think block ("w1 w1") ends the prompt
    assert ids[False][-2:] == [7, 7] and ids[False][:-2] == ids[True]


def test_dataset_flags_without_dataset_are_usage_errors(
    tiny_target: TinyTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--target", str(tiny_target.dir), "--out", str(tmp_path / "c")]
    base += ["--target-layer-ids", "1"]
    with pytest.raises(SystemExit) as exit_:
        run_build(capsys, *base, "--prompts", str(tiny_target.prompts), "--thinking")
    assert exit_.value.code == 2
    with pytest.raises(SystemExit):
        run_build(capsys, *base, "--prompts", str(tiny_target.prompts))  # no --max-new-tokens
    assert "--max-new-tokens N is required with --prompts" in capsys.readouterr().err
