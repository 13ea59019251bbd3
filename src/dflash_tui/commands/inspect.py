"""`dflash-tui inspect host:path [--against host:path] [--sha256] [--json]`."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from dflash_tui.checkpoints import (
    CheckpointError,
    CheckpointSummary,
    Comparison,
    compare,
    inspect,
    parse_location,
)
from dflash_tui.commands import CommandError
from dflash_tui.commands.output import add_json_flag, print_json
from dflash_tui.core.config_parse import load_config
from dflash_tui.core.units import count, plural, size
from dflash_tui.remote.pool import HostPool


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "inspect",
        parents=[common],
        help="summarise a checkpoint from its safetensors headers and config.json",
        description="Read only the safetensors header(s) and config.json of a checkpoint (no weight "
        "bytes cross the network): parameters, dtypes, bytes, layers, hidden size, block size, "
        "target layers. --against compares two checkpoints, or a drafter with its target model.",
    )
    p.add_argument("location", metavar="host:path", help="checkpoint directory (or a local path)")
    p.add_argument("--against", metavar="host:path", help="another checkpoint or the target model")
    p.add_argument(
        "--sha256", action="store_true", help="also hash the weights (computed on the host)"
    )
    add_json_flag(p)
    p.set_defaults(handler=run)


def _print_summary(s: CheckpointSummary) -> None:
    d = s.as_dict()
    dtypes = ", ".join(f"{k} {v / max(s.parameters, 1):.0%}" for k, v in s.dtypes.items()) or "-"
    rows: list[tuple[str, Any]] = [
        ("checkpoint", s.location),
        ("kind", s.kind),
        ("parameters", f"{s.parameters:,} ({count(s.parameters)})"),
        ("dtype", dtypes),
        ("weights", f"{size(s.weight_bytes)} in {plural(len(s.files), 'file')}"),
        ("layers", d["layers"]),
        ("hidden size", d["hidden_size"]),
        ("block size", d["block_size"]),
        ("target layers", d["target_layer_ids"]),
        ("mask token id", d["mask_token_id"]),
        ("config sha256", s.config_sha256),
    ]
    for f in s.files:
        if f.sha256:
            rows.append((f"sha256 {f.name}", f.sha256))
    for problem in s.problems:
        rows.append(("PROBLEM", problem))
    for field in s.unscorable:
        rows.append(("NOT SCORABLE", field))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {'-' if value is None else value}")


def _print_comparison(c: Comparison) -> None:
    print()
    if c.kind == "drafter-vs-target":
        verdict = "compatible" if c.compatible else "INCOMPATIBLE"
        if c.unchecked:
            verdict += f" ({len(c.unchecked)} check(s) could not be made, see below)"
        print("drafter vs target: " + verdict)
    else:
        same_bytes = {True: "yes", False: "no", None: "unknown (use --sha256)"}[c.same_bytes]
        if c.bytes_differ:
            which = ", ".join(c.bytes_differ)
            same_bytes += f" ({which} {'differs' if len(c.bytes_differ) == 1 else 'differ'})"
        print(
            f"same tensors and shapes: {'yes' if c.same_shapes else 'no'}; same bytes: {same_bytes}"
        )
    for line in c.differences[:40]:
        print(f"  {line}")
    if len(c.differences) > 40:
        print(f"  ... and {len(c.differences) - 40} more")
    for line in c.unchecked:
        print(f"  {line}")


async def _inspect(args: argparse.Namespace) -> tuple[CheckpointSummary, CheckpointSummary | None]:
    first, second = (
        parse_location(args.location),
        parse_location(args.against) if args.against else None,
    )
    needs_pool = first.host is not None or (second is not None and second.host is not None)
    config = load_config(args.config) if needs_pool else None
    for loc in (first, second):
        if (
            loc is not None
            and loc.host is not None
            and config is not None
            and loc.host not in config.hosts
            and loc.host not in config.stores
        ):
            raise CommandError(
                f"unknown host or store {loc.host!r} in {loc}; hosts: {', '.join(config.hosts)}"
                + (f"; stores: {', '.join(config.stores)}" if config.stores else ""),
                2,
            )
    pool = HostPool(config) if config is not None else None
    try:
        tasks = [inspect(pool, first, sha256=args.sha256)]
        if second is not None:
            tasks.append(inspect(pool, second, sha256=args.sha256))
        results = await asyncio.gather(*tasks)
    except CheckpointError as exc:
        raise CommandError(str(exc)) from None
    finally:
        if pool is not None:
            await pool.close()
    return results[0], results[1] if second is not None else None


def run(args: argparse.Namespace) -> int:
    summary, other = asyncio.run(_inspect(args))
    comparison = compare(summary, other) if other is not None else None
    if args.json:
        out: dict[str, Any] = summary.as_dict()
        if other is not None and comparison is not None:
            out = {
                "checkpoint": summary.as_dict(),
                "against": other.as_dict(),
                "comparison": comparison.as_dict(),
            }
        print_json(out)
    else:
        _print_summary(summary)
        if other is not None and comparison is not None:
            print()
            _print_summary(other)
            _print_comparison(comparison)
    if comparison is not None and not comparison.compatible:
        return 1
    return 1 if summary.problems else 0
