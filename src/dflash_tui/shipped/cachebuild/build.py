"""One cache build: check inputs, then per prompt generate, forward, write; manifest last.

Every file lands as ``NAME.part`` first and is renamed into place, so a file
under its final name is always whole. A sample file already under its final
name belongs to this build (``build.json`` says which build a directory holds)
and is kept, which makes an interrupted build resumable one sample at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import BUILD_FORMAT, CACHE_FORMAT
from .datasets import DATASETS, Selection, formatted, protocol_block, read_rows
from .errors import InputError, RunFailure
from .prompts import Prompt, read_prompts

Emit = Callable[[dict[str, Any]], None]
HEAD_FILE = "target_head.safetensors"
BUILD_FILE = "build.json"
MANIFEST_FILE = "manifest.json"


@dataclass
class Options:
    """What to build and how (the command line, parsed)."""

    target: Path
    prompts: Path | None
    out: Path
    max_new_tokens: int
    layer_ids: tuple[int, ...] | None = None
    drafter: Path | None = None
    device: str = "cpu"
    dtype: str = "auto"
    chat_template: bool = True
    # --dataset instead of --prompts (docs/evals.md "The protocol")
    dataset: str | None = None
    data: Path | None = None
    selection: Selection = field(default_factory=Selection)
    thinking: bool = False


@dataclass(frozen=True)
class Prompts:
    """The prompts to build from, and the protocol block when they come from a dataset."""

    items: list[Prompt]
    sha256: str
    protocol: dict[str, Any] | None = None


def load_prompts(opts: Options) -> Prompts:
    """--prompts FILE as it is, or --dataset's rows picked and formatted as z-lab's benchmark."""
    if opts.dataset is None:
        assert opts.prompts is not None
        return Prompts(read_prompts(opts.prompts), _sha256(opts.prompts))
    spec = DATASETS[opts.dataset]
    rows, source = read_rows(spec, opts.data)
    if not rows:
        raise InputError(f"--dataset {spec.name}: the split has no rows ({source})")
    way, indices = opts.selection.pick(len(rows))
    picked = formatted(spec, rows, indices)
    items = [Prompt(spec.name, p.index, text=p.text) for p in picked]
    texts = json.dumps([p.text for p in picked], ensure_ascii=False).encode("utf-8")
    protocol = protocol_block(spec, rows, source, opts.selection, way, picked)
    return Prompts(items, hashlib.sha256(texts).hexdigest(), protocol)


def drafter_layer_ids(drafter: Path) -> tuple[int, ...]:
    """``target_layer_ids`` of a z-lab drafter config (under ``dflash_config`` or top level)."""
    path = Path(drafter) / "config.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"--drafter: cannot read {path} ({exc})") from None
    nested = raw.get("dflash_config") if isinstance(raw, dict) else None
    ids = (nested or {}).get("target_layer_ids", raw.get("target_layer_ids"))
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
        raise InputError(
            f"--drafter {drafter}: config.json has no target_layer_ids list (found {ids!r})",
            hint="pass --target-layer-ids explicitly",
        )
    return tuple(ids)


def resolve_layer_ids(opts: Options) -> tuple[int, ...]:
    """--target-layer-ids, else the drafter's; both given must agree."""
    from_drafter = drafter_layer_ids(opts.drafter) if opts.drafter else None
    if opts.layer_ids and from_drafter and tuple(opts.layer_ids) != from_drafter:
        raise InputError(
            f"--target-layer-ids {','.join(map(str, opts.layer_ids))} differs from the drafter's "
            f"target_layer_ids {list(from_drafter)} ({opts.drafter}/config.json)",
            hint="drop one of them: a cache built with other layers cannot score that drafter",
        )
    ids = opts.layer_ids or from_drafter
    if not ids:
        raise InputError(
            "no target layer ids: pass --target-layer-ids 1,16,31 or --drafter DIR",
        )
    return tuple(ids)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """auto: bfloat16 on a GPU, float32 on the CPU."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def sample_file(index: int, name: str) -> str:
    """``00003_json_parser.safetensors``: unique per prompt line, safe on any filesystem."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:64] or "sample"
    return f"{index:05d}_{slug}.safetensors"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` then rename over ``path``: the final name never holds a partial file."""
    tmp = path.with_name(path.name + ".part")
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, obj: Any) -> None:
    _write_atomic(path, lambda p: p.write_text(json.dumps(obj, indent=1) + "\n"))


def save_tensors(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> None:
    from safetensors.torch import save_file

    # contiguous private copies: safetensors refuses views and shared storage (tied heads)
    plain = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
    _write_atomic(path, lambda p: save_file(plain, str(p), metadata=meta))


class Target:
    """The target model and its tokenizer (the tokenizer only when a prompt needs one)."""

    def __init__(self, directory: Path, device: torch.device, dtype: torch.dtype) -> None:
        try:
            from transformers import AutoModelForCausalLM
            from transformers.utils import logging as hf_logging
        except ImportError as exc:
            raise RunFailure(
                f"cannot import transformers ({exc})",
                hint="install the cache extra on this host: pip install 'dflash-tui[cache]' "
                "(or pip install transformers)",
            ) from None
        if not (Path(directory) / "config.json").is_file():
            raise InputError(f"--target {directory}: no config.json there (not a model directory)")
        self.dir = Path(directory)
        hf_logging.disable_progress_bar()  # the job log keeps JSON events, not redrawn bars
        try:
            model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype)
        except (OSError, ValueError, KeyError) as exc:
            raise InputError(
                f"--target {directory}: cannot load it as a causal LM ({exc})"
            ) from None
        # transformers wraps PreTrainedModel.to in a decorator whose typing loses `self`
        self.model = model.to(device).eval()  # type: ignore[arg-type]
        self.device = device
        self.dtype = dtype
        self.num_layers = int(model.config.num_hidden_layers)
        self.hidden_size = int(model.config.hidden_size)
        self._tokenizer: Any = None

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                self._tokenizer = AutoTokenizer.from_pretrained(str(self.dir))
            except (OSError, ValueError) as exc:
                raise InputError(
                    f"--target {self.dir}: cannot load its tokenizer ({exc})",
                    hint='give {"name", "input_ids"} prompts, or a model directory with a tokenizer',
                ) from None
        return self._tokenizer

    def check_layers(self, ids: tuple[int, ...]) -> None:
        bad = [i for i in ids if not 0 <= i < self.num_layers]
        if bad:
            raise InputError(
                f"--target-layer-ids: {bad} outside the target's layers 0..{self.num_layers - 1} "
                f"({self.dir}/config.json: num_hidden_layers = {self.num_layers})",
                hint="layer id i means hidden_states[i + 1], the output of decoder layer i",
            )

    def chat_template_sha256(self) -> str:
        """sha256 of the tokenizer's chat template (JSON of it when it is several by name)."""
        template = getattr(self.tokenizer, "chat_template", None)
        text = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def chat_text(self, text: str, thinking: bool) -> str:
        """One user turn through the chat template with the generation prompt, as z-lab's
        benchmark renders it (``enable_thinking`` always passed; templates without it ignore it)."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise InputError(
                f"--target {self.dir}: its tokenizer has no chat template, and --dataset prompts "
                "go through it"
            )
        rendered = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": text}],
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=thinking,
        )
        return str(rendered)

    def token_ids(
        self, prompt: Prompt, chat_template: bool, thinking: bool | None = None
    ) -> list[int]:
        """``thinking`` None: a --prompts build (the template's own default); True/False: a
        --dataset build, rendered as text and tokenized with no special tokens added."""
        if thinking is not None and prompt.text is not None:
            text = self.chat_text(prompt.text, thinking)
            return [int(t) for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]]
        if prompt.input_ids is not None:
            return list(prompt.input_ids)
        tok = self.tokenizer
        if prompt.text is not None and not chat_template:
            return list(tok(prompt.text, add_special_tokens=False)["input_ids"])
        if not getattr(tok, "chat_template", None):
            raise InputError(
                f"prompt {prompt.name!r} (line {prompt.line}): the target's tokenizer has no chat "
                "template",
                hint="pass --no-chat-template to tokenize the text as it is",
            )
        messages = list(prompt.messages or ({"role": "user", "content": prompt.text},))
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        if ids and isinstance(ids[0], list):
            ids = ids[0]
        return [int(t) for t in ids]

    def generate(self, prompt_ids: list[int], max_new_tokens: int) -> torch.Tensor:
        """The target's greedy continuation: prompt plus up to ``max_new_tokens`` tokens (int64)."""
        ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        gen = self.model.generation_config
        pad = gen.pad_token_id if gen.pad_token_id is not None else gen.eos_token_id
        if isinstance(pad, (list, tuple)):  # several end tokens (Qwen3): any one pads
            pad = pad[0] if pad else None
        with torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                num_beams=1,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=pad,
            )
        return out[0].to("cpu", torch.long)

    def features(
        self, sequence: torch.Tensor, ids: tuple[int, ...], n_new: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``hidden_states[id + 1]`` of one forward over ``sequence``, concatenated in id order
        ([T, len(ids) * H], on the CPU), and the forward's argmax at the last ``n_new + 1``
        positions (to check the continuation is greedy under this forward)."""
        seq = sequence.to(self.device)[None]
        with torch.inference_mode():
            try:  # logits of the continuation only: [V] per position adds up on long samples
                out = self.model(seq, output_hidden_states=True, logits_to_keep=n_new + 1)
            except TypeError:  # a model class without logits_to_keep
                out = self.model(seq, output_hidden_states=True)
            feats = torch.cat([out.hidden_states[i + 1][0] for i in ids], dim=-1)
            greedy = out.logits[0, -(n_new + 1) :].argmax(-1)
        return feats.to("cpu"), greedy.to("cpu")

    def head(self) -> dict[str, torch.Tensor]:
        return {
            "embed_tokens": self.model.get_input_embeddings().weight,
            "lm_head": self.model.get_output_embeddings().weight,
        }


def _build_record(
    opts: Options, ids: tuple[int, ...], dtype: torch.dtype, prompts: Prompts
) -> dict[str, Any]:
    record = {
        "format": BUILD_FORMAT,
        "target": str(Path(opts.target).resolve()),
        "target_layer_ids": list(ids),
        "max_new_tokens": opts.max_new_tokens,
        "prompts_sha256": prompts.sha256,
        "dtype": str(dtype).replace("torch.", ""),
        "chat_template": opts.chat_template,
    }
    if prompts.protocol is not None:  # only then: a --prompts build's record stays as it was
        record["dataset"] = opts.dataset
        record["thinking"] = opts.thinking
    return record


def _check_dataset_options(opts: Options) -> None:
    if opts.dataset is not None and opts.dataset not in DATASETS:
        raise InputError(
            f"--dataset {opts.dataset}: not one of z-lab's ({', '.join(DATASETS)})",
        )
    if opts.dataset is not None and not opts.chat_template:
        raise InputError(
            "--no-chat-template with --dataset: z-lab's protocol sends each prompt through the "
            "target's chat template",
            hint="drop --no-chat-template, or give the rendered texts with --prompts",
        )


def _claim_out_dir(out: Path, record: dict[str, Any]) -> None:
    """Create ``out`` for this build, or accept it when it holds this same build."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / BUILD_FILE
    if path.exists():
        try:
            previous = json.loads(path.read_text())
        except (OSError, ValueError):
            previous = None
        if previous != record:
            diff = (
                sorted(k for k in record if previous.get(k) != record[k])
                if isinstance(previous, dict)
                else ["unreadable"]
            )
            raise InputError(
                f"--out {out}: holds another build ({path}: {', '.join(diff)} differ)",
                hint="use a new --out directory, or remove that one to rebuild",
            )
        return
    others = [p.name for p in out.iterdir() if not p.name.endswith(".part")]
    if others:
        raise InputError(
            f"--out {out}: not empty and not a cache build ({', '.join(sorted(others)[:4])})",
            hint="use a new or empty directory",
        )
    write_json_atomic(path, record)


def build(opts: Options, emit: Emit) -> dict[str, Any]:
    """Build the cache; returns the summary (also the ``done`` event's body)."""
    started = time.perf_counter()
    ids = resolve_layer_ids(opts)
    _check_dataset_options(opts)
    loaded = load_prompts(opts)
    prompts = loaded.items
    device = torch.device(opts.device)
    dtype = resolve_dtype(opts.dtype, device)
    out = Path(opts.out)
    target = Target(opts.target, device, dtype)
    target.check_layers(ids)
    record = _build_record(opts, ids, dtype, loaded)
    thinking = opts.thinking if loaded.protocol is not None else None
    _claim_out_dir(out, record)
    meta = {"format": "pt", "dflash": CACHE_FORMAT}
    if not (out / HEAD_FILE).exists():
        save_tensors(out / HEAD_FILE, target.head(), meta)
    total = len(prompts)
    emit(
        {
            "event": "start",
            "total": total,
            "device": str(device),
            "dtype": record["dtype"],
            "target_layer_ids": list(ids),
            "num_layers": target.num_layers,
            "hidden_size": target.hidden_size,
        }
    )
    emit({"event": "progress", "done": 0, "total": total})
    entries, new_tokens, skipped = [], 0, 0
    for index, prompt in enumerate(prompts):
        name = sample_file(index, prompt.name)
        entry: dict[str, Any] = {"name": prompt.name, "file": name}
        if loaded.protocol is not None:
            entry["id"] = loaded.protocol["sample_ids"][index]
        entries.append(entry)
        if (out / name).exists():
            skipped += 1
            emit({"event": "sample", "index": index, "name": prompt.name, "skipped": True})
            emit({"event": "progress", "done": index + 1, "total": total})
            continue
        t0 = time.perf_counter()
        prompt_ids = target.token_ids(prompt, opts.chat_template, thinking)
        sequence = target.generate(prompt_ids, opts.max_new_tokens)
        n_new = sequence.numel() - len(prompt_ids)
        if n_new < 1:
            raise RunFailure(f"prompt {prompt.name!r}: the target generated no token")
        t_gen = time.perf_counter() - t0
        feats, greedy = target.features(sequence, ids, n_new)
        agree = int((greedy[:-1] == sequence[len(prompt_ids) :]).sum())
        mask = torch.zeros(sequence.numel(), dtype=torch.long)
        mask[len(prompt_ids) :] = 1
        tensors = {"input_ids": sequence, "hidden_states": feats, "loss_mask": mask}
        save_tensors(out / name, tensors, {**meta, "name": prompt.name})
        elapsed = time.perf_counter() - t0
        new_tokens += n_new
        emit(
            {
                "event": "sample",
                "index": index,
                "name": prompt.name,
                "prompt_tokens": len(prompt_ids),
                "new_tokens": n_new,
                "greedy_agree": agree,
                "generate_s": round(t_gen, 3),
                "elapsed_s": round(elapsed, 3),
                "tok_s": round(n_new / elapsed, 2) if elapsed > 0 else None,
            }
        )
        emit({"event": "progress", "done": index + 1, "total": total})
    manifest: dict[str, Any] = {
        "format": CACHE_FORMAT,
        "target_layer_ids": list(ids),
        "hidden_size": target.hidden_size,
        "head": HEAD_FILE,
        "samples": entries,
        "built_by": {**record, "tool": "dflash_tui.shipped.cachebuild"},
    }
    if loaded.protocol is not None:
        manifest["protocol"] = {
            **loaded.protocol,
            "thinking": opts.thinking,
            "chat_template_sha256": target.chat_template_sha256(),
            "max_new_tokens": opts.max_new_tokens,
        }
    write_json_atomic(out / MANIFEST_FILE, manifest)
    return {
        "out": str(out),
        "samples": total,
        "skipped": skipped,
        "new_tokens": new_tokens,
        "elapsed_s": round(time.perf_counter() - started, 3),
    }
