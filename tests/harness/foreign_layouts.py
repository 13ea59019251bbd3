"""Write a dflash-cache/1 cache's samples again in the layouts other projects write.

Each writer follows the project's own writer (read with the search tools; docs/evals.md "Caches"):

* SpecForge ``scripts/prepare_hidden_states.py``: ``rows_<g>-<g+2000>/data_<i>.ckpt``
  (``.ckpt.gz`` with ``--compress``: ``gzip.open(path, "wb", compresslevel=6)`` around
  ``torch.save``), one dict per sample: the DFlash strategy's ``OfflineCaptureLayout``
  persists ``input_ids`` [T], ``loss_mask`` [T] and ``hidden_states`` [1, T, n*H]
  (the capture gets ``unsqueeze(0)``); the EAGLE-3 layout persists ``aux_hidden_state``
  [1, T, n*H] and the last layer as ``hidden_state`` [1, T, H].
* speculators: ``prepare_data.py`` saves a ``datasets`` dataset (``save_to_disk``:
  ``data-00000-of-00001.arrow`` as an Arrow IPC stream, ``state.json``,
  ``dataset_info.json``; columns ``input_ids``, ``loss_mask``, ``seq_len``); vLLM's
  ``ExampleHiddenStatesConnector`` writes ``safetensors.torch.save_file({"hidden_states":
  [T, n_layers, H], "token_ids": [T]})``, kept as ``<data>/hidden_states/hs_<i>.safetensors``.
* speculators before that connector (``scripts/data_generation_offline.py``, Nov 2025 to
  Apr 2026): ``torch.save({"input_ids": [T], "hidden_states": [[T, H], ...], "loss_mask":
  [T]}, "data_<i>.pt")`` and ``data_config.json`` (``DataGenerationConfig`` version 2.0)
  with ``hidden_states.layer_ids``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

FILE_GROUP_SIZE = 2000  # HiddenStatesGenerator's default file_group_size


def read_samples(cache: Path) -> tuple[dict, list[dict[str, torch.Tensor]], dict]:
    """(manifest, samples in manifest order, head tensors) of a safetensors dflash-cache/1."""
    manifest = json.loads((cache / "manifest.json").read_text())
    samples = []
    for entry in manifest["samples"]:
        with safe_open(str(cache / entry["file"]), framework="pt") as f:
            samples.append({k: f.get_tensor(k) for k in f.keys()})  # noqa: SIM118
    with safe_open(str(cache / manifest.get("head", "target_head.safetensors")), "pt") as f:
        head = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
    return manifest, samples, head


def specforge_path(root: Path, idx: int, compress: bool) -> Path:
    group = (idx // FILE_GROUP_SIZE) * FILE_GROUP_SIZE
    ext = ".ckpt.gz" if compress else ".ckpt"
    return root / f"rows_{group}-{group + FILE_GROUP_SIZE}" / f"data_{idx}{ext}"


def save_specforge(path: Path, record: dict, compress: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.open(path, "wb", compresslevel=6) as f:
            torch.save(record, f)
    else:
        torch.save(record, path)


def write_specforge(
    samples: list[dict[str, torch.Tensor]],
    out: Path,
    *,
    compress: bool = False,
    strategy: str = "dflash",
    hidden: int = 0,
) -> Path:
    """A SpecForge offline cache of ``samples`` (DFlash or EAGLE-3 strategy layout)."""
    for idx, s in enumerate(samples):
        feats = s["hidden_states"].unsqueeze(0)
        record = {"input_ids": s["input_ids"].clone(), "loss_mask": s["loss_mask"].clone()}
        if strategy == "dflash":
            record["hidden_states"] = feats
        else:  # eagle3: aux layers, and the last layer stored on its own
            record["aux_hidden_state"] = feats
            record["hidden_state"] = torch.randn(1, feats.shape[1], hidden)
        save_specforge(specforge_path(out, idx, compress), record, compress)
    return out


def write_arrow_dataset(out: Path, input_ids: list[list[int]], loss_mask: list[list[int]]) -> None:
    """What ``Dataset.save_to_disk`` writes for speculators' preprocessed rows."""
    import pyarrow as pa

    out.mkdir(parents=True, exist_ok=True)
    features = {
        "input_ids": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "List"},
        "loss_mask": {"feature": {"dtype": "int64", "_type": "Value"}, "_type": "List"},
        "seq_len": {"dtype": "int64", "_type": "Value"},
    }
    schema = pa.schema(
        [
            pa.field("input_ids", pa.list_(pa.int64())),
            pa.field("loss_mask", pa.list_(pa.int64())),
            pa.field("seq_len", pa.int64()),
        ],
        metadata={"huggingface": json.dumps({"info": {"features": features}})},
    )
    table = pa.table(
        {"input_ids": input_ids, "loss_mask": loss_mask, "seq_len": [len(r) for r in input_ids]},
        schema=schema,
    )
    name = "data-00000-of-00001.arrow"
    with pa.OSFile(str(out / name), "wb") as sink:
        writer = pa.RecordBatchStreamWriter(sink, schema)
        for batch in table.to_batches(max_chunksize=1000):  # DEFAULT_MAX_BATCH_SIZE
            writer.write_batch(batch)
        writer.close()
    state = {
        "_data_files": [{"filename": name}],
        "_fingerprint": "0123456789abcdef",
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": "torch",
        "_output_all_columns": False,
        "_split": None,
    }
    (out / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    info = {"features": features, "citation": "", "description": "", "homepage": ""}
    (out / "dataset_info.json").write_text(json.dumps(info, indent=2))


def write_speculators(
    samples: list[dict[str, torch.Tensor]],
    out: Path,
    *,
    hidden: int,
    order: list[int],
    extra_layers: int = 1,
    seed: int = 0,
) -> Path:
    """A speculators data directory: dataset rows plus ``hidden_states/hs_<i>.safetensors``.

    ``order`` says which of the cache's feature layers goes in each slot of the file,
    and ``extra_layers`` random layers are appended (launch_vllm.py's last layer).
    """
    gen = torch.Generator().manual_seed(seed)
    write_arrow_dataset(
        out,
        [s["input_ids"].tolist() for s in samples],
        [s["loss_mask"].tolist() for s in samples],
    )
    for i, s in enumerate(samples):
        feats = s["hidden_states"]
        t = feats.shape[0]
        layers = [feats[:, j * hidden : (j + 1) * hidden] for j in order]
        layers += [
            torch.randn(t, hidden, generator=gen).to(feats.dtype) for _ in range(extra_layers)
        ]
        tensors = {"hidden_states": torch.stack(layers, dim=1), "token_ids": s["input_ids"].clone()}
        path = out / "hidden_states" / f"hs_{i}.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path))
    return out


def write_speculators_pt(
    samples: list[dict[str, torch.Tensor]],
    out: Path,
    *,
    hidden: int,
    layer_ids: list[int] | None,
    order: list[int],
    extra_layers: int = 1,
    seed: int = 0,
) -> Path:
    """speculators' older output: data_<i>.pt per sample and data_config.json (if layer_ids)."""
    gen = torch.Generator().manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(samples):
        feats = s["hidden_states"]
        layers = [feats[:, j * hidden : (j + 1) * hidden].contiguous() for j in order]
        layers += [
            torch.randn(feats.shape[0], hidden, generator=gen).to(feats.dtype)
            for _ in range(extra_layers)
        ]
        record = {
            "input_ids": s["input_ids"].clone(),
            "hidden_states": layers,
            "loss_mask": s["loss_mask"].clone(),
        }
        torch.save(record, out / f"data_{i}.pt")
    if layer_ids is not None:
        config = {
            "version": "2.0",
            "hidden_states": {
                "layer_ids": layer_ids,
                "description": "Layers selected for EAGLE3 fusion and target logits",
            },
            "format": {"file_pattern": "data_{idx}.pt"},
        }
        (out / "data_config.json").write_text(json.dumps(config, indent=2))
    return out
