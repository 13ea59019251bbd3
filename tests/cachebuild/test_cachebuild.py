"""The cache builder (docs/evals.md "Building a cache") against a fresh transformers forward and generate()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dflash_tui.shipped.cachebuild import build as build_mod
from dflash_tui.shipped.cachebuild import cli
from dflash_tui.shipped.harness.cache import read_manifest
from tests.cachebuild.tiny_target import LAYER_IDS, MAX_NEW, TinyTarget, write_prompts


def run_build(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict]]:
    code = cli.main([*argv, "--device", "cpu"])
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def build_args(t: TinyTarget, out: Path, prompts: Path | None = None, **kw: str) -> list[str]:
    args = {
        "--target": str(t.dir),
        "--prompts": str(prompts or t.prompts),
        "--out": str(out),
        "--target-layer-ids": ",".join(map(str, LAYER_IDS)),
        "--max-new-tokens": str(MAX_NEW),
        **kw,
    }
    return [x for kv in args.items() for x in kv]


@pytest.fixture(scope="module")
def model(tiny_target: TinyTarget):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_target.dir), dtype=torch.float32).eval()


def expected_prompt_ids(t: TinyTarget) -> list[list[int]]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(t.dir))

    def chat(messages: list[dict]) -> list[int]:
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return tok(text, add_special_tokens=False)["input_ids"]

    return [
        chat([{"role": "user", "content": "w1 w2 w3 w4"}]),
        [7, 8, 9, 10, 11],
        chat([{"role": "user", "content": "w9 w8"}]),
    ]


def test_cache_equals_generate_and_a_fresh_forward(
    tiny_target: TinyTarget, model, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cache"
    code, events = run_build(capsys, *build_args(tiny_target, out))
    assert code == 0, events
    assert [e["done"] for e in events if e["event"] == "progress"] == [0, 1, 2, 3]
    assert events[-1]["event"] == "done" and events[-1]["new_tokens"] == 3 * MAX_NEW

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "dflash-cache/1"
    assert manifest["target_layer_ids"] == list(LAYER_IDS) and manifest["hidden_size"] == 64
    assert [s["name"] for s in manifest["samples"]] == ["chat text", "ids", "chat text"]
    assert len({s["file"] for s in manifest["samples"]}) == 3  # same name, separate files
    assert read_manifest(out).samples  # the harness reads it
    assert not list(out.glob("*.part"))

    head = load_file(str(out / "target_head.safetensors"))
    assert torch.equal(head["embed_tokens"], model.get_input_embeddings().weight)
    assert torch.equal(head["lm_head"], model.get_output_embeddings().weight)

    for entry, prompt in zip(manifest["samples"], expected_prompt_ids(tiny_target), strict=True):
        sample = load_file(str(out / entry["file"]))
        ids = torch.tensor([prompt])
        with torch.inference_mode():
            generated = model.generate(ids, max_new_tokens=MAX_NEW, do_sample=False)[0]
            fresh = model(generated[None], output_hidden_states=True).hidden_states
        assert torch.equal(sample["input_ids"], generated)
        want = torch.cat([fresh[i + 1][0] for i in LAYER_IDS], dim=-1)
        assert sample["hidden_states"].shape == (generated.numel(), len(LAYER_IDS) * 64)
        assert torch.equal(sample["hidden_states"], want)  # bit for bit: the same forward
        # not the neighbouring index (the embedding output or one layer off)
        off = torch.cat([fresh[i][0] for i in LAYER_IDS], dim=-1)
        assert not torch.allclose(sample["hidden_states"], off, atol=1e-3)
        mask = sample["loss_mask"].tolist()
        assert mask == [0] * len(prompt) + [1] * MAX_NEW


def test_an_interrupted_build_resumes_sample_by_sample(
    tiny_target: TinyTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    out = tmp_path / "cache"
    real = build_mod.Target.generate
    calls = []

    def stop_at_second(self, prompt_ids, n):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, prompt_ids, n)

    monkeypatch.setattr(build_mod.Target, "generate", stop_at_second)
    code, events = run_build(capsys, *build_args(tiny_target, out))
    assert code == 1 and "run again to resume" in events[-1]["message"]
    assert not (out / "manifest.json").exists()  # never a manifest for a half-built cache
    assert not list(out.glob("*.part"))
    first = next(out.glob("00000_*.safetensors"))
    kept = first.stat()
    monkeypatch.setattr(build_mod.Target, "generate", real)

    code, events = run_build(capsys, *build_args(tiny_target, out))
    assert code == 0
    samples = [e for e in events if e["event"] == "sample"]
    assert [e.get("skipped", False) for e in samples] == [True, False, False]
    assert (first.stat().st_ino, first.stat().st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)

    fresh = tmp_path / "fresh"
    assert run_build(capsys, *build_args(tiny_target, fresh))[0] == 0
    for name in sorted(p.name for p in fresh.glob("0*.safetensors")):
        a, b = load_file(str(out / name)), load_file(str(fresh / name))
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_another_build_into_the_same_directory_is_refused(
    tiny_target: TinyTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cache"
    assert run_build(capsys, *build_args(tiny_target, out))[0] == 0
    code, events = run_build(capsys, *build_args(tiny_target, out, **{"--max-new-tokens": "5"}))
    assert code == 2
    assert "holds another build" in events[-1]["message"]
    assert "max_new_tokens" in events[-1]["message"]


def test_layer_ids_default_to_the_drafters(
    tiny_target: TinyTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dflash_tui.demo.synthetic import write_drafter

    drafter = write_drafter(tmp_path / "drafter", vocab_size=64, target_layer_ids=(0, 2))
    prompts = write_prompts(tmp_path / "p.jsonl", [{"name": "x", "input_ids": [3, 4, 5]}])
    args = build_args(tiny_target, tmp_path / "cache", prompts)
    at = args.index("--target-layer-ids")
    del args[at : at + 2]
    code, _ = run_build(capsys, *args, "--drafter", str(drafter))
    assert code == 0
    assert json.loads((tmp_path / "cache/manifest.json").read_text())["target_layer_ids"] == [0, 2]
    code, events = run_build(capsys, *args)  # neither: a clear usage error
    assert code == 2 and "--target-layer-ids" in events[-1]["message"]


@pytest.mark.parametrize(
    ("rows", "extra", "words"),
    [
        ([{"name": "x", "input_ids": [3, 4]}], {"--target-layer-ids": "1,4"}, "outside"),
        ([{"name": "x"}, "not json"], {}, "line 1"),
        ([{"name": "x", "prompt": "w1"}, {"prompt": "w1"}], {}, "line 2"),
    ],
)
def test_bad_input_exits_2_and_names_it(
    tiny_target: TinyTarget,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rows: list,
    extra: dict,
    words: str,
) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join((json.dumps(r) if isinstance(r, dict) else r) + "\n" for r in rows))
    code, events = run_build(capsys, *build_args(tiny_target, tmp_path / "c", prompts, **extra))
    assert code == 2
    assert words in events[-1]["message"]
    assert not (tmp_path / "c" / "manifest.json").exists()


def test_the_builder_loads_nothing_else_of_the_package() -> None:
    import subprocess
    import sys

    code = (
        "import sys\nimport dflash_tui.shipped.cachebuild.build, dflash_tui.shipped.cachebuild.cli\n"
        "print(' '.join(m for m in sys.modules if m.startswith('dflash_tui')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ours = set(out.stdout.split())
    assert ours and all(
        m in ("dflash_tui", "dflash_tui.shipped")
        or m.startswith(("dflash_tui.shipped.cachebuild", "dflash_tui.shipped.common"))
        for m in ours
    ), ours


def test_a_build_stopped_by_sigterm_leaves_whole_files_and_resumes(
    tiny_target: TinyTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import signal
    import subprocess
    import sys

    prompts = write_prompts(
        tmp_path / "p.jsonl", [{"name": f"s{i}", "input_ids": [3 + i, 4, 5]} for i in range(3)]
    )
    args = build_args(tiny_target, tmp_path / "cache", prompts, **{"--max-new-tokens": "100"})
    proc = subprocess.Popen(  # by its command (docs/evals.md "Building a cache"; evals/cachebuild/__main__.py)
        [sys.executable, "-m", "dflash_tui.evals.cachebuild", *args, "--device", "cpu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # stop it once the first sample is written, as `cancel` does
        if line.startswith('{"event": "sample"'):
            proc.send_signal(signal.SIGTERM)
            break
    rest = proc.stdout.read()
    assert proc.wait(timeout=60) == 1
    assert "interrupted" in rest
    out = tmp_path / "cache"
    assert not list(out.glob("*.part")) and not (out / "manifest.json").exists()
    done = sorted(p.name for p in out.glob("0*.safetensors"))
    assert done and len(done) < 3

    code, events = run_build(capsys, *args)
    assert code == 0
    skipped = [e["name"] for e in events if e["event"] == "sample" and e.get("skipped")]
    assert len(skipped) == len(done)
    assert json.loads((out / "manifest.json").read_text())["samples"][2]["name"] == "s2"
