"""One eval run: check inputs, pick anchors, batch the forward, average the metrics.

Anchors are walked in (sample, position) order, so a batch covers consecutive
positions of one or two samples, its contexts pad little, and a sample's
context K/V is computed once and dropped once its last anchor is done.
A CUDA out-of-memory halves the batch and retries the same anchors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..common.cli import is_oom
from . import SCHEMA
from .attention import Attention, resolve_attention
from .cache import Manifest, SampleSpec, TargetHead, check_sample, load_features, read_manifest
from .compat import check_compatibility
from .drafter import SLIDING, DrafterConfig, DrafterFiles
from .errors import InputError, Problems, RunFailure
from .foreign import ForeignCache, detect_layout
from .greedy import (
    CACHE_LABELS,
    CACHEBUILD_TOOL,
    TARGET_GREEDY,
    TOP1,
    GreedyWalks,
    greedy_metrics,
)
from .metrics import Totals, ddtree_matches, label_ranks, streak, top_log_probs
from .model import ContextKV, DrafterModel, block_logits

Emit = Callable[[dict[str, Any]], None]


@dataclass
class Options:
    """What to evaluate and how (the command line, parsed)."""

    drafter: Path
    cache: Path
    device: str = "cpu"
    dtype: str = "auto"
    topk: tuple[int, ...] = (1, 4, 8)
    budgets: tuple[int, ...] = (4, 8, 16, 32)
    batch_anchors: int = 16
    max_anchors: int | None = None
    suite: str | None = None
    name: str | None = None
    target: Path | None = None  # target model directory: the head of a foreign cache
    cache_layer_ids: tuple[int, ...] | None = None  # the cache's layers, in its own convention
    sliding: str | None = None  # "bidirectional" | "causal"; None: the default (attention.py)
    per_anchor: Path | None = None  # JSONL, one line per scored anchor (opt-in)


@dataclass
class Inputs:
    """Inputs that passed every check, before anything heavy is loaded."""

    drafter: DrafterFiles
    manifest: Manifest
    head: TargetHead
    samples: list[SampleSpec]


@dataclass
class Anchor:
    sample: int
    position: int


@dataclass
class Batch:
    """Per-anchor results of one forward, on the CPU.

    ``ranks`` has one entry per label that exists: B-1, or fewer for an anchor
    near the end of its sample that only the greedy walk scores (greedy.py).
    """

    ranks: list[list[int]] = field(default_factory=list)
    top_lp: list[list[list[float]]] = field(default_factory=list)


def open_cache(
    drafter: DrafterFiles,
    cache_dir: Path,
    target: Path | None,
    cache_layer_ids: tuple[int, ...] | None,
    problems: Problems,
) -> Manifest:
    """A dflash-cache/1 directory, or a SpecForge / speculators cache detected by its layout."""
    cache_dir = Path(cache_dir)
    layout = detect_layout(cache_dir) if cache_dir.is_dir() else None
    if layout is not None:
        cfg = drafter.config
        foreign = ForeignCache(
            cache_dir, layout, target, cache_layer_ids, cfg.target_layer_ids, cfg.hidden_size
        )
        return foreign.manifest(problems)
    manifest = read_manifest(cache_dir)
    if target is not None:
        manifest.target_dir, manifest.head_file = Path(target), None
    if cache_layer_ids is not None and cache_layer_ids != manifest.target_layer_ids:
        problems.add(
            f"--cache-layer-ids {','.join(map(str, cache_layer_ids))}: the cache's manifest.json "
            f"says target_layer_ids {list(manifest.target_layer_ids)}",
            "a dflash-cache/1 manifest names its layers; drop --cache-layer-ids",
        )
    for spec in manifest.samples:
        check_sample(spec, problems)
    return manifest


def open_inputs(
    drafter_dir: Path,
    cache_dir: Path,
    target: Path | None = None,
    cache_layer_ids: tuple[int, ...] | None = None,
) -> Inputs:
    """Open and check the drafter and the cache; one InputError lists every problem."""
    drafter = DrafterFiles(drafter_dir)
    problems = Problems()
    manifest = open_cache(drafter, cache_dir, target, cache_layer_ids, problems)
    head = TargetHead(manifest)
    drafter.check_weights(problems)
    head.check(problems)
    samples = [s for s in manifest.samples if s.input_ids is not None]
    check_compatibility(drafter, manifest, head, samples, problems)
    problems.raise_if_any(
        f"cannot evaluate drafter {drafter.dir} on cache {manifest.dir}:",
        hint="use the drafter trained for this cache's target model, or rebuild the cache "
        "with that target and the drafter's target_layer_ids",
    )
    return Inputs(drafter, manifest, head, samples)


def find_anchors(
    samples: list[SampleSpec], block_size: int, max_anchors: int | None
) -> list[Anchor]:
    """Anchors per §4.4 (loss_mask[a] == 1 and a+B-1 <= T-1), optionally an even subset.

    The subset takes indices ``floor(i * n / max_anchors)``: spread over every
    sample and the same on every run.
    """
    anchors = []
    for si, s in enumerate(samples):
        assert s.loss_mask is not None
        last = s.length - block_size  # a + B - 1 <= T - 1
        if last < 0:
            continue
        for a in torch.nonzero(s.loss_mask[: last + 1] != 0).flatten().tolist():
            anchors.append(Anchor(si, a))
    return even_subset(anchors, max_anchors)


def even_subset(anchors: list[Anchor], max_anchors: int | None) -> list[Anchor]:
    """At most ``max_anchors`` of ``anchors``, at indices ``floor(i * n / max_anchors)``."""
    if max_anchors is None or len(anchors) <= max_anchors:
        return anchors
    n = len(anchors)
    return [anchors[i * n // max_anchors] for i in range(max_anchors)]


class Runner:
    """Drafter weights on the device, scoring batches of anchors.

    ``samples`` supply token ids and names; their features are read on demand
    by :meth:`features` (from the cache files here, from memory in the bench).
    """

    def __init__(
        self,
        cfg: DrafterConfig,
        model: DrafterModel,
        embed: torch.Tensor,
        lm_head: torch.Tensor,
        samples: list[SampleSpec],
        topk_max: int,
    ):
        self.cfg = cfg
        self.model = model
        self.embed = embed  # may stay on the CPU; only the rows of a batch move
        self.lm_head = lm_head
        self.samples = samples
        self.width = topk_max
        self.device = model.device
        self._contexts: dict[int, ContextKV] = {}
        self._ctx_rows = dict.fromkeys(range(len(samples)), 0)
        self.fitted_batch: int | None = None  # the batch size an out-of-memory halved to

    @classmethod
    def from_inputs(
        cls,
        inputs: Inputs,
        device: torch.device,
        dtype: torch.dtype,
        topk_max: int,
        attention: Attention | None = None,
    ) -> Runner:
        """Load checked inputs: drafter weights and lm_head onto ``device``, embed on the CPU."""
        cfg = inputs.drafter.config
        model = DrafterModel(cfg, inputs.drafter.load(device, dtype), attention)
        embed, lm_head = inputs.head.load()
        lm_head = lm_head.to(device=device, dtype=dtype)
        return cls(cfg, model, embed, lm_head, inputs.samples, topk_max)

    def features(self, sample: int, rows: int) -> torch.Tensor:
        """The first ``rows`` feature rows of a sample."""
        return load_features(self.samples[sample], rows)

    def plan(self, anchors: list[Anchor]) -> None:
        """Remember how many context rows each sample needs (its largest anchor).

        A context cached for fewer rows than a new plan needs is dropped, so it
        is rebuilt long enough.
        """
        for a in anchors:
            self._ctx_rows[a.sample] = max(self._ctx_rows[a.sample], a.position)
        for s in [s for s, c in self._contexts.items() if c.length < self._ctx_rows[s]]:
            del self._contexts[s]

    def _context(self, sample: int) -> ContextKV:
        if sample not in self._contexts:
            rows = self._ctx_rows[sample]
            width = self.cfg.n_feature_layers * self.cfg.hidden_size
            feats = self.features(sample, rows) if rows else torch.zeros(0, width)
            self._contexts[sample] = self.model.context(feats)
        return self._contexts[sample]

    def release_before(self, sample: int) -> None:
        """Drop the context K/V of samples whose anchors are all done."""
        for s in [s for s in self._contexts if s < sample]:
            del self._contexts[s]

    def logits(self, batch: list[Anchor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Float32 logits ``[N, B-1, V]`` of a batch and its labels ``[N, B-1]``, on the device."""
        samples = sorted({a.sample for a in batch})
        slot = {s: i for i, s in enumerate(samples)}
        contexts = [self._context(s) for s in samples]
        b = self.cfg.block_size
        ids = [self.samples[a.sample].input_ids for a in batch]
        anchors = torch.tensor([a.position for a in batch], dtype=torch.long)
        which = torch.tensor([slot[a.sample] for a in batch], dtype=torch.long)
        # every sample's input_ids is loaded (Sample.input_ids is None only before that)
        tokens = torch.stack([t[a.position] for t, a in zip(ids, batch, strict=True)])  # type: ignore[index]
        rows = [t[a.position + 1 : a.position + b] for t, a in zip(ids, batch, strict=True)]  # type: ignore[index]
        # near a sample's end (greedy walk only) fewer labels exist: pad, the ranks are cut
        pad = torch.zeros(b - 1, dtype=torch.long)
        labels = torch.stack([torch.cat([r, pad[: b - 1 - r.numel()]]) for r in rows])
        labels = labels.to(self.model.device)
        x = self.model.embed_block(self.embed, tokens)
        hidden = self.model.block_hidden(contexts, which, anchors, x)
        with torch.inference_mode():
            return block_logits(self.cfg, hidden, self.lm_head), labels

    def label_count(self, anchor: Anchor) -> int:
        """Labels that exist for an anchor: B-1, fewer near the end of its sample."""
        spec = self.samples[anchor.sample]
        return min(self.cfg.block_size - 1, spec.length - 1 - anchor.position)

    def score(self, batch: list[Anchor]) -> Batch:
        """Forward one batch and reduce its logits to label ranks and top log-probs."""
        logits, labels = self.logits(batch)
        with torch.inference_mode():
            top = top_log_probs(logits, self.width)
            if torch.isnan(top).any():  # a NaN logit turns its whole log_softmax row NaN
                names = sorted({self.samples[a.sample].name for a in batch})
                raise RunFailure(
                    f"the drafter produced NaN logits (samples {names})",
                    hint="the checkpoint may be corrupt or diverged; try --dtype float32 to rule out "
                    "bf16 overflow",
                )
            ranks = label_ranks(logits, labels).cpu().tolist()
            top_lp = top.cpu().tolist()
        ranks = [r[: self.label_count(a)] for r, a in zip(ranks, batch, strict=True)]
        return Batch(ranks, top_lp)


def score_anchors(
    runner: Runner,
    anchors: list[Anchor],
    topk: tuple[int, ...],
    budgets: tuple[int, ...],
    batch_anchors: int,
    emit: Emit,
    on_anchor: Callable[[Anchor, list[int], dict[int, int]], None] | None = None,
) -> tuple[Totals, dict[str, Totals]]:
    """Score every anchor in batches; returns suite and per-task totals.

    Emits ``start``, ``progress`` after each batch, and ``retry`` when an
    out-of-memory error halves the batch; RunFailure when even one anchor
    does not fit. ``on_anchor(anchor, ranks, ddtree matches)`` sees each scored anchor.
    """
    runner.plan(anchors)
    device = runner.device
    positions = runner.cfg.block_size - 1
    suite = Totals(positions, topk, budgets)
    names = list(dict.fromkeys(s.name for s in runner.samples))
    tasks = {name: Totals(positions, topk, budgets) for name in names}
    total, done, batch_size = len(anchors), 0, _batch_size(runner, batch_anchors)
    emit(
        {
            "event": "start",
            "total": total,
            "device": str(device),
            "dtype": str(runner.model.dtype).replace("torch.", ""),
            "batch_anchors": batch_size,
        }
    )
    emit({"event": "progress", "done": 0, "total": total})
    while done < total:
        chunk = anchors[done : done + batch_size]
        scored, batch_size = _score_batch(runner, chunk, batch_size, budgets, emit)
        if scored is None:
            continue
        for anchor, ranks, tree in scored:
            suite.add(ranks, tree)
            tasks[runner.samples[anchor.sample].name].add(ranks, tree)
            if on_anchor is not None:
                on_anchor(anchor, ranks, tree)
        done += len(chunk)
        emit({"event": "progress", "done": done, "total": total})
    return suite, tasks


def _score_batch(
    runner: Runner, anchors: list[Anchor], batch_size: int, budgets: Sequence[int], emit: Emit
) -> tuple[list[tuple[Anchor, list[int], dict[int, int]]] | None, int]:
    """Score ``anchors`` after letting go of the samples before them: each anchor with its
    label ranks and DDTree matches, and the batch size to go on with; None (and half the
    batch size) after an out-of-memory, to retry."""
    runner.release_before(anchors[0].sample)
    result, batch_size = _score_or_halve(runner, anchors, batch_size, emit)
    if result is None:
        return None, batch_size
    return [
        (anchor, ranks, ddtree_matches(top_lp, ranks, budgets))
        for anchor, ranks, top_lp in zip(anchors, result.ranks, result.top_lp, strict=True)
    ], batch_size


def _score_or_halve(
    runner: Runner, chunk: list[Anchor], batch_size: int, emit: Emit
) -> tuple[Batch | None, int]:
    """Score ``chunk``; on out-of-memory, (None, half the batch size) to retry with.

    RunFailure when even one anchor does not fit.
    """
    try:
        return runner.score(chunk), batch_size
    except Exception as exc:
        if not is_oom(exc):
            raise
    device = runner.device
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if batch_size == 1:
        raise RunFailure(
            f"out of memory on {device} even with one anchor per batch "
            f"(sample {runner.samples[chunk[0].sample].name!r}, context {chunk[0].position} tokens)",
            hint="free the GPU (another job may hold it), use a larger GPU, or --device cpu",
        ) from None
    batch_size = runner.fitted_batch = max(1, batch_size // 2)
    emit({"event": "retry", "reason": "out_of_memory", "batch_anchors": batch_size})
    return None, batch_size


def _batch_size(runner: Runner, batch_anchors: int) -> int:
    """``batch_anchors``, or less when an out-of-memory already halved it on this runner."""
    return max(1, min(batch_anchors, runner.fitted_batch or batch_anchors))


Scored = tuple[list[int], dict[int, int]]  # an anchor's label ranks and DDTree matches


def finish_walks(
    runner: Runner,
    walks: GreedyWalks,
    budgets: tuple[int, ...],
    batch_anchors: int,
    emit: Emit,
    scored: dict[int, dict[int, Scored]] | None = None,
    on_anchor: Callable[[Anchor, list[int], dict[int, int]], None] | None = None,
) -> int:
    """Score the anchors the greedy walks still wait for, round by round, until every walk
    is done; returns how many anchors were scored here.

    A walk's next anchor depends on its last block, so each round scores the
    anchors the unfinished walks wait for (the first ``batch_anchors`` of them,
    sample by sample, so few contexts are held at once). ``scored`` (sample ->
    position -> ranks and DDTree matches) holds anchors already scored, the
    ``--max-anchors`` subset; anchors scored here join it, so a walk that reaches
    an anchor another walk drafted from uses it, and none is scored twice. A
    sample's entries go once its walks are done. Emits ``progress`` with
    ``"phase": "greedy"``, counting the positions the walks covered here out of
    those they had left.
    """
    scored = scored if scored is not None else {}
    start = walks.covered
    wanted = {s for s, _ in walks.pending()}
    runner.plan([Anchor(s, runner.samples[s].length - 1) for s in sorted(wanted)])
    batch_size, count = _batch_size(runner, batch_anchors), 0
    while not walks.done:
        chunk = walks.pending(batch_size)
        for sample in [s for s in scored if s < chunk[0][0]]:  # its walks are done
            del scored[sample]
        hits = [(s, a) for s, a in chunk if a in scored.get(s, {})]
        for sample, position in hits:
            walks.feed(sample, position, *scored[sample][position])
        if hits:
            continue
        anchors = [Anchor(s, a) for s, a in chunk]
        batch, batch_size = _score_batch(runner, anchors, batch_size, budgets, emit)
        if batch is None:
            continue
        for anchor, ranks, tree in batch:
            scored.setdefault(anchor.sample, {})[anchor.position] = (ranks, tree)
            walks.feed(anchor.sample, anchor.position, ranks, tree)
            if on_anchor is not None:
                on_anchor(anchor, ranks, tree)
        count += len(anchors)
        done, total = walks.covered - start, walks.total - start
        emit({"event": "progress", "phase": "greedy", "done": done, "total": total})
    runner.release_before(len(runner.samples))
    return count


def attention_of(cfg: DrafterConfig, sliding: str | None) -> Attention:
    """The run's attention semantics: the drafter config's own, else ``sliding``, else the default."""
    layers = sum(t == SLIDING for t in cfg.layer_types)
    attention = resolve_attention(cfg.causal, cfg.causal_key, sliding, layers)
    return dataclasses.replace(attention, windowless_layers=cfg.windowless_layers)


class PerAnchorWriter:
    """``--per-anchor FILE``: one JSON line per scored anchor, in scoring order.

    ``{"sample": i, "name": ..., "file": ..., "anchor": a, "ranks": [...],
    "streak_top1": s, ..., "ddtree_b8": d}``: ``i`` indexes the manifest's
    samples, ``a`` is the anchor's position in that sample, ``ranks`` the label
    ranks of positions 1..B-1 (0 = argmax). Anchors scored only for the greedy
    walks (greedy.py; not in the all-anchor means) say ``"walk_only": true``;
    near a sample's end their ``ranks`` cover only the labels that exist.
    Written to ``FILE.part`` and renamed once every anchor is in, like the
    results file.
    """

    def __init__(self, path: Path, samples: list[SampleSpec], topk: tuple[int, ...]):
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".part")
        self.samples = samples
        self.topk = topk

    def __enter__(self) -> PerAnchorWriter:
        try:
            self.file = open(self.tmp, "w", encoding="utf-8")
        except OSError as exc:
            raise RunFailure(
                f"cannot write --per-anchor {self.path}: {exc.strerror or exc}"
            ) from None
        return self

    def write(
        self, anchor: Anchor, ranks: list[int], tree: dict[int, int], walk_only: bool = False
    ) -> None:
        spec = self.samples[anchor.sample]
        row: dict[str, Any] = {
            "sample": anchor.sample,
            "name": spec.name,
            "file": spec.path.name,
            "anchor": anchor.position,
            "ranks": ranks,
        }
        row.update({f"streak_top{k}": streak(ranks, k) for k in self.topk})
        row.update({f"ddtree_b{b}": n for b, n in sorted(tree.items())})
        if walk_only:
            row["walk_only"] = True
        self.file.write(json.dumps(row) + "\n")

    def __exit__(self, kind: object, *_: object) -> None:
        self.file.close()
        if kind is None:
            self.tmp.replace(self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def evaluate(opts: Options, emit: Emit) -> dict[str, Any]:
    """Run the eval and return the ``dflash-eval/1`` results object."""
    started = time.perf_counter()
    inputs = open_inputs(opts.drafter, opts.cache, opts.target, opts.cache_layer_ids)
    cfg = inputs.drafter.config
    every = find_anchors(inputs.samples, cfg.block_size, None)
    anchors = even_subset(every, opts.max_anchors)
    if not anchors:
        raise InputError(
            f"cache {inputs.manifest.dir}: no anchors (need loss_mask == 1 at a position a with "
            f"a + block_size - 1 <= T - 1; block_size is {cfg.block_size})",
            hint="check loss_mask in the sample files, and that samples are longer than one block",
        )
    device = torch.device(opts.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    dtype = resolve_dtype(opts.dtype, device)
    topk = tuple(sorted(set(opts.topk) | {1}))
    budgets = tuple(sorted(set(opts.budgets)))
    width = max(budgets) if budgets else 1
    attention = attention_of(cfg, opts.sliding)
    note = attention.note()
    if note:
        emit({"event": "note", "message": note})
    runner = Runner.from_inputs(inputs, device, dtype, width, attention)
    # every sample's loss_mask is loaded (Sample.loss_mask is None only before that)
    walks = GreedyWalks([s.loss_mask for s in inputs.samples], budgets)  # type: ignore[misc]
    if walks.single_runs > walks.runs:
        emit(
            {
                "event": "note",
                "message": f"loss_mask marks {walks.single_runs} isolated positions and "
                f"{walks.runs} longer runs: tau_greedy walks each run of loss_mask == 1 as a "
                "response, so a mask of anchor positions only leaves it little to walk (its "
                "tau_greedy says little)",
            }
        )
    # Every anchor scored: the walks advance as the anchors they wait for go by. A subset:
    # its anchors are kept for the walks, which score the rest of their paths afterwards.
    subset = len(anchors) < len(every)
    scored: dict[int, dict[int, Scored]] = {}
    with contextlib.ExitStack() as stack:
        writer = (
            stack.enter_context(PerAnchorWriter(opts.per_anchor, inputs.samples, topk))
            if opts.per_anchor is not None
            else None
        )

        def on_anchor(anchor: Anchor, ranks: list[int], tree: dict[int, int]) -> None:
            if subset:
                scored.setdefault(anchor.sample, {})[anchor.position] = (ranks, tree)
            else:
                walks.feed(anchor.sample, anchor.position, ranks, tree)
            if writer is not None:
                writer.write(anchor, ranks, tree)

        def on_walk(anchor: Anchor, ranks: list[int], tree: dict[int, int]) -> None:
            if writer is not None:
                writer.write(anchor, ranks, tree, walk_only=True)

        suite, tasks = score_anchors(
            runner, anchors, topk, budgets, opts.batch_anchors, emit, on_anchor
        )
        walk_only = finish_walks(runner, walks, budgets, opts.batch_anchors, emit, scored, on_walk)

    metrics = {**suite.summary(), **greedy_metrics(walks.totals())}
    task_out = {}
    of_task: dict[str, list[int]] = {}
    for i, spec in enumerate(inputs.samples):
        of_task.setdefault(spec.name, []).append(i)
    for name, t in tasks.items():
        greedy = walks.totals(of_task[name])
        task_out[name] = {
            "n_anchors": t.n_anchors,
            "n_blocks": greedy.blocks[TOP1],
            "n_generated": greedy.generated,
            **t.summary(),
            **greedy_metrics(greedy),
        }
    totals = walks.totals()
    built = inputs.manifest.built_by == CACHEBUILD_TOOL
    greedy_record = {
        "labels": TARGET_GREEDY if built else CACHE_LABELS,
        "n_runs": walks.runs,
        "n_blocks": totals.blocks[TOP1],
        "n_generated": totals.generated,
        "ddtree_blocks": {f"b{b}": totals.blocks[b] for b in budgets},
        "walk_only_anchors": walk_only,
    }
    doc = {
        "schema": SCHEMA,
        "suite": opts.suite or Path(opts.cache).resolve().name,
        "checkpoint": {
            "name": opts.name or Path(opts.drafter).resolve().name,
            "path": str(Path(opts.drafter).resolve()),
            "config_sha256": inputs.drafter.config_sha256,
        },
        "block_size": cfg.block_size,
        "attention": attention.record(),
        "n_anchors": len(anchors),
        "device": str(device),
        "elapsed_s": round(time.perf_counter() - started, 3),
        "metrics": metrics,
        "greedy": greedy_record,
        "tasks": task_out,
    }
    if inputs.manifest.protocol is not None:  # the cache's protocol, with the numbers it gave
        doc["protocol"] = inputs.manifest.protocol
    return doc
