"""The eval preflight: a drafter checked against a suite's cache before anything is copied.

The harness refuses a drafter that does not fit the cache (layer ids, hidden
size, vocab, head), but only once it runs on the suite's host: after the relay
of a multi-GB checkpoint and the harness upload. The same rules
(`shipped/harness/rules.py`) can be applied to what the headers already say, so
the console reads the checkpoint's config and safetensors headers on its host
and the cache's manifest, first sample header and target head on the suite's
host, in parallel and kilobytes in all, and refuses with every problem listed.
Nothing is written anywhere. Unreadable cache details are left to the harness
(it checks the same rules again); an unreachable host is an error of its own.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
from collections.abc import Mapping
from typing import Any

from dflash_tui.checkpoints import CheckpointError, CheckpointSummary, inspect_remote
from dflash_tui.core.config import SuiteConfig
from dflash_tui.evals.discovery.targets import CheckpointRef
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool
from dflash_tui.shipped.harness.rules import (
    EMBED_NAMES,
    HEAD_FILE_NAMES,
    LM_HEAD_NAMES,
    CacheFacts,
    cache_problems,
    drafter_problems,
    fc_width,
)
from dflash_tui.shipped.servedbench.prompts import named_target

MAX_MANIFEST_BYTES = 4 * 1024 * 1024
REFUSED = "refused before copying anything"  # how a refused job's error starts

# What kind of cache $1 is, and what to read next: "M" + manifest.json's bytes
# (dflash-cache/1); "S <file>" the first speculators hs_*.safetensors; "P" a
# SpecForge rows_*/data_*.ckpt[.gz] or speculators data_*.pt cache (pickles: their
# shapes need torch, so only the layer ids are checked here); "E ..." no directory.
_CACHE_SCRIPT = r"""c=$1; max=$2
if [ -f "$c/manifest.json" ]; then printf 'M\n'; head -c "$max" -- "$c/manifest.json"; exit 0; fi
[ -d "$c" ] || { printf 'E no such directory: %s\n' "$c"; exit 0; }
for d in "$c" "$c/hidden_states"; do
    for f in "$d"/hs_*.safetensors; do [ -f "$f" ] && { printf 'S %s\n' "$f"; exit 0; }; done
done
for f in "$c"/rows_*/data_*.ckpt* "$c"/data_*.pt; do [ -f "$f" ] && { printf 'P\n'; exit 0; }; done
printf 'E no cache there (manifest.json, rows_*/data_*.ckpt, hs_*.safetensors or data_*.pt): %s\n' "$c"
"""


class PreflightRefused(Exception):
    """The drafter cannot be scored on the suite; `problems` lists every reason."""

    def __init__(self, message: str, problems: list[str], hints: list[str]) -> None:
        self.problems = problems
        self.hints = hints
        # the first line is what `jobs` shows: the first reason itself
        head = f"{REFUSED}: {problems[0]}" if problems else f"{REFUSED}: {message}"
        if len(problems) > 1:
            head += f" (and {len(problems) - 1} more)"
        lines = [head]
        if problems:
            lines += [message, *(f"  - {p}" for p in problems)]
        if hints:
            lines.append("hint: " + "; ".join(hints))
        super().__init__("\n".join(lines))


async def preflight(pool: HostPool, ref: CheckpointRef, suite: SuiteConfig, host: str) -> None:
    """Check `ref` against `suite` as evaluated on `host`; PreflightRefused lists the problems.

    RemoteError (a host down) and CheckpointError (an unreadable checkpoint) pass through.
    """
    drafter_summary, cache = await asyncio.gather(
        inspect_remote(pool, ref.host, ref.path), read_cache_facts(pool, host, suite)
    )
    where = ref.location
    if drafter_summary.kind != "drafter":
        raise PreflightRefused(
            f"{where} is not a DFlash drafter (looks like a {drafter_summary.kind} model: no "
            "dflash block_size/target_layer_ids or fc/hidden_norm weights)",
            list(drafter_summary.problems),
            [],
        )
    shapes = {t.name: (t.dtype, t.shape) for t in drafter_summary.tensors}
    cfg, problems = drafter_problems(drafter_summary.config, shapes, where)
    for line in drafter_summary.problems:
        if line not in problems.items:
            problems.add(line)
    if cfg is not None:
        cache_problems(cfg, fc_width(shapes), cache, problems)
    if problems:
        raise PreflightRefused(
            f"{where} cannot be scored on suite {suite.name!r} ({host}:{suite.cache}):",
            problems.items,
            problems.hints,
        )


async def read_cache_facts(pool: HostPool, host: str, suite: SuiteConfig) -> CacheFacts:
    """The cache's layer ids, hidden size, a sample's feature width and the head's shape."""
    result = await pool.run(
        host,
        shell_script(_CACHE_SCRIPT, suite.cache, str(MAX_MANIFEST_BYTES)),
        encoding=None,
        timeout=30,
        check=False,
    )
    out: bytes = result.stdout
    tag, _, rest = out.partition(b"\n")
    where = f"{host}:{suite.cache}"
    if tag.startswith(b"E "):
        raise PreflightRefused(
            f"suite {suite.name!r}: {tag[2:].decode(errors='replace')} on {host}",
            [],
            ["check the suite's cache path in hosts.toml (and --host)"],
        )
    if tag == b"M":
        return await _dflash_cache_facts(pool, host, suite, rest)
    # a foreign cache: the layers are the suite's cache_layer_ids, the head its target
    held = suite.cache_layer_ids
    if held is None:
        raise PreflightRefused(
            f"suite {suite.name!r}: the cache at {where} does not record which target layers it "
            "holds, and the suite gives no cache_layer_ids",
            [],
            ["set cache_layer_ids in the suite, in the convention of the tool that wrote the "
             "cache (docs/evals.md)"],
        )  # fmt: skip
    if not suite.target:
        raise PreflightRefused(
            f"suite {suite.name!r}: the cache at {where} holds no target head, and the suite "
            "gives no target",
            [],
            ["set target in the suite: the target model's directory on its host"],
        )
    head = await _target_head(pool, host, suite.target)
    widths: dict[str, int] = {}
    if tag.startswith(b"S "):  # speculators: vLLM's id s is our s - 1 (harness/foreign.py)
        held = tuple(i - 1 for i in held)
        sample = tag[2:].decode(errors="replace")
        hs = (await _header_shapes(pool, host, sample)).get("hidden_states")
        if hs is not None and len(hs) == 3 and hs[1] != len(held):  # [T, n_layers, H]
            raise PreflightRefused(
                f"suite {suite.name!r}: {host}:{sample} holds {hs[1]} layers per token, the "
                f"suite's cache_layer_ids name {len(held)}",
                [],
                ["check the suite's cache_layer_ids"],
            )
    return CacheFacts(
        where=f"the cache (suite {suite.name!r} cache_layer_ids)",
        feature_widths=widths,
        head_rows=head.head_rows,
        head_hidden=head.head_hidden,
        head_where=head.head_where,
        held_layer_ids=held,
    )


async def _dflash_cache_facts(
    pool: HostPool, host: str, suite: SuiteConfig, raw: bytes
) -> CacheFacts:
    where = f"{host}:{suite.cache}/manifest.json"
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return CacheFacts(where)  # the harness says what is wrong with it
    if not isinstance(manifest, dict):
        return CacheFacts(where)
    ids = manifest.get("target_layer_ids")
    hidden = manifest.get("hidden_size")
    samples = manifest.get("samples")
    first = samples[0] if isinstance(samples, list) and samples else None
    if not isinstance(first, dict):
        first = {}
    sample_file = first.get("file")
    # the suite's target is a path on its host as it is written; the manifest's, in the cache
    target = suite.target or (
        posixpath.join(suite.cache, manifest["target"])
        if isinstance(manifest.get("target"), str)
        else None
    )
    jobs: list[Any] = []
    if isinstance(sample_file, str):
        jobs.append(_header_shapes(pool, host, posixpath.join(suite.cache, sample_file)))
    if target is not None:
        jobs.append(_target_head(pool, host, target))
    else:
        head_name = manifest.get("head", "target_head.safetensors")
        jobs.append(_head_file(pool, host, posixpath.join(suite.cache, str(head_name))))
    found = await asyncio.gather(*jobs)
    widths: dict[str, int] = {}
    if isinstance(sample_file, str):
        hs = found.pop(0).get("hidden_states")
        if hs is not None and len(hs) == 2:
            widths[str(first.get("name", sample_file))] = hs[1]
    head: CacheFacts = found[0]
    return CacheFacts(
        where=where,
        hidden_size=hidden if isinstance(hidden, int) and not isinstance(hidden, bool) else None,
        target_layer_ids=tuple(ids) if isinstance(ids, list) and ids else None,
        feature_widths=widths,
        head_rows=head.head_rows,
        head_hidden=head.head_hidden,
        head_where=head.head_where,
    )


async def bench_preflight(pool: HostPool, suite: SuiteConfig, host: str) -> None:
    """A served bench serves the suite's target with the drafter: PreflightRefused when
    neither the suite nor its cache's manifest names that target (as the bench would say
    on its host, after the relay)."""
    if suite.target:
        return
    result = await pool.run(
        host,
        shell_script('head -c "$2" -- "$1/manifest.json" 2>/dev/null', suite.cache,
                     str(MAX_MANIFEST_BYTES)),
        encoding=None,
        timeout=30,
        check=False,
    )  # fmt: skip
    try:
        manifest = json.loads(result.stdout)
    except (UnicodeDecodeError, json.JSONDecodeError):
        manifest = None
    if named_target(manifest) is None:
        raise PreflightRefused(
            f"cache {host}:{suite.cache} names no target model (suite {suite.name!r}): a served "
            "bench serves the target with the checkpoint as its drafter",
            [],
            ['set the suite\'s target in hosts.toml (target = "HOST:DIR", the model the cache '
             "was built from)"],
        )  # fmt: skip


async def _header_shapes(pool: HostPool, host: str, path: str) -> Mapping[str, tuple[int, ...]]:
    """Tensor shapes from one safetensors file's header ({} when it cannot be read)."""
    try:
        summary = await inspect_remote(pool, host, path)
    except CheckpointError:
        return {}
    return {t.name: t.shape for t in summary.tensors}


def _head_facts(
    shapes: Mapping[str, tuple[int, ...]], embed: tuple[str, ...], lm: tuple[str, ...], where: str
) -> CacheFacts:
    e = next((shapes[k] for k in embed if k in shapes), None)
    h = next((shapes[k] for k in lm if k in shapes), None) or e  # tied embeddings
    if h is None or len(h) != 2:
        return CacheFacts(where, head_where=where)
    rows = min(h[0], e[0]) if e is not None and len(e) == 2 else h[0]
    return CacheFacts(where, head_rows=rows, head_hidden=h[1], head_where=where)


async def _head_file(pool: HostPool, host: str, path: str) -> CacheFacts:
    shapes = await _header_shapes(pool, host, path)
    return _head_facts(
        shapes, HEAD_FILE_NAMES["embed"], HEAD_FILE_NAMES["lm_head"], f"target head {host}:{path}"
    )


async def _target_head(pool: HostPool, host: str, path: str) -> CacheFacts:
    where = f"target model {host}:{path}"
    try:
        summary: CheckpointSummary = await inspect_remote(pool, host, path)
    except CheckpointError:
        return CacheFacts(where, head_where=where)
    shapes = {t.name: t.shape for t in summary.tensors}
    return _head_facts(shapes, EMBED_NAMES, LM_HEAD_NAMES, where)


__all__ = ["REFUSED", "PreflightRefused", "bench_preflight", "preflight", "read_cache_facts"]
