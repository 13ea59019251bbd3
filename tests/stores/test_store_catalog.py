"""`locate` finds store copies beside host copies; `inspect` reads a store's headers by range."""

from __future__ import annotations

import json
from pathlib import Path

from dflash_tui.checkpoints import inspect, inspect_local, locate, parse_location
from dflash_tui.core.config_parse import load_config
from dflash_tui.remote import HostPool
from dflash_tui.transfer import RelayOptions, relay
from tests.checkpoints.drafters import DRAFTER_CONFIG, write_safetensors
from tests.stores.s3env import S3Env
from tests.transfer.files import relay_env

MIB = 1 << 20


def drafter(folder: Path) -> None:
    """A small, complete sharded drafter with real (random) weight bytes and an index."""
    folder.mkdir(parents=True)
    h, heads, kv, d, inter, layers = 128, 4, 2, 32, 512, 2
    config = {
        **DRAFTER_CONFIG,
        "hidden_size": h,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": d,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
    }
    (folder / "config.json").write_text(json.dumps(config))
    ids = len(config["dflash_config"]["target_layer_ids"])
    first = {
        "fc.weight": ("BF16", [h, ids * h]),
        "hidden_norm.weight": ("BF16", [h]),
        "norm.weight": ("BF16", [h]),
    }
    second: dict[str, tuple[str, list[int]]] = {}
    for i in range(layers):
        a, m = f"layers.{i}.self_attn", f"layers.{i}.mlp"
        second |= {
            f"{a}.q_proj.weight": ("BF16", [heads * d, h]),
            f"{a}.k_proj.weight": ("BF16", [kv * d, h]),
            f"{a}.v_proj.weight": ("BF16", [kv * d, h]),
            f"{a}.o_proj.weight": ("BF16", [h, heads * d]),
            f"{a}.q_norm.weight": ("BF16", [d]),
            f"{a}.k_norm.weight": ("BF16", [d]),
            f"{m}.gate_proj.weight": ("BF16", [inter, h]),
            f"{m}.up_proj.weight": ("BF16", [inter, h]),
            f"{m}.down_proj.weight": ("BF16", [h, inter]),
            f"layers.{i}.input_layernorm.weight": ("BF16", [h]),
            f"layers.{i}.post_attention_layernorm.weight": ("BF16", [h]),
        }
    shards = {
        "model-00001-of-00002.safetensors": first,
        "model-00002-of-00002.safetensors": second,
    }
    weight_map = {}
    for name, tensors in shards.items():
        write_safetensors(folder / name, tensors, sparse=False)
        weight_map.update({t: name for t in tensors})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


async def test_inspect_reads_only_headers_and_locate_groups_store_and_host_copies(
    sshd_factory, write_config, s3: S3Env
) -> None:
    host = sshd_factory("a")
    ckpt = host.home / "models" / "Qwen3.6-27B-DFlash"
    drafter(ckpt)
    other = host.home / "models" / "qwen3.6-27b-dflash-step4000"
    other.mkdir()
    (other / "config.json").write_text("{}")
    path = write_config(
        {"a": (host, {"model_roots": [str(host.home / "models")]})}, extra=s3.store_table()
    )
    async with relay_env(path) as (pool, conn):
        await relay(pool, conn, f"a:{ckpt}", "bk:drafters/", options=RelayOptions(retries=0))
    config = load_config(path)
    async with HostPool(config) as pool:
        summary = await inspect(pool, parse_location("bk:drafters/Qwen3.6-27B-DFlash"))
        found, errors = await locate(pool, "qwen3.6-27b-dflash")
    here = inspect_local(str(ckpt))
    assert summary.kind == "drafter" and summary.problems == ()
    assert summary.shapes() == here.shapes() and summary.parameters == here.parameters
    assert summary.config_sha256 == here.config_sha256
    assert [f.size_bytes for f in summary.files] == [f.size_bytes for f in here.files]
    weights = sum(f.size_bytes for f in here.files)
    assert summary.bytes_read < weights / 4  # config, index and headers only

    assert errors == {}
    by_place = {(f.place, f.host, Path(f.path).name): f for f in found}
    assert set(by_place) == {
        ("host", "a", "Qwen3.6-27B-DFlash"),
        ("host", "a", "qwen3.6-27b-dflash-step4000"),
        ("store", "bk", "Qwen3.6-27B-DFlash"),
    }
    store_copy = by_place["store", "bk", "Qwen3.6-27B-DFlash"]
    assert store_copy.path == "drafters/Qwen3.6-27B-DFlash"
    assert store_copy.copy_group == by_place["host", "a", "Qwen3.6-27B-DFlash"].copy_group
    assert store_copy.copy_group != by_place["host", "a", "qwen3.6-27b-dflash-step4000"].copy_group
    assert store_copy.size_bytes == sum(p.stat().st_size for p in ckpt.iterdir())

    async with HostPool(config) as pool:
        found_sha, _ = await locate(pool, "Qwen3.6-27B-DFlash", sha256=True)
    groups = {(f.place, Path(f.path).name): f.copy_group for f in found_sha}
    assert groups["store", "Qwen3.6-27B-DFlash"] == groups["host", "Qwen3.6-27B-DFlash"]


def test_inspect_and_locate_commands_show_store_copies(
    sshd_factory, write_config, s3: S3Env
) -> None:
    import json as jsonlib
    import os
    import subprocess
    import sys

    host = sshd_factory("a")
    ckpt = host.home / "models" / "step4000"
    drafter(ckpt)
    path = write_config(
        {"a": (host, {"model_roots": [str(host.home / "models")]})}, extra=s3.store_table()
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dflash_tui", "--config", str(path), *args],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip

    assert cli("relay", f"a:{ckpt}", "bk:ck/").returncode == 0
    shown = cli("inspect", "bk:ck/step4000", "--json")
    assert shown.returncode == 0, shown.stderr
    assert jsonlib.loads(shown.stdout)["kind"] == "drafter"
    unknown = cli("inspect", "nope:ck/step4000")
    assert unknown.returncode == 2 and "stores: bk" in unknown.stderr
    table = cli("locate", "step4000")
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()[1:]]
    assert ["a", str(ckpt)] in [r[1:3] for r in rows]
    store_rows = [r for r in rows if r[2] == "(store)"]
    assert len(store_rows) == 1 and store_rows[0][3] == "bk:ck/step4000"
    assert store_rows[0][0] == next(r[0] for r in rows if r[1] == "a")  # the same COPY letter
