"""Fuzz what `inspect` reads of a checkpoint: safetensors headers, config.json, and the
remote script's framed records (checkpoints/summary.py). The header comes from
safetensors' own writer; each outcome is a summary or a CheckpointError naming the place.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import save

from dflash_tui.checkpoints.summary import (
    CheckpointError,
    CheckpointSummary,
    _parse_frames,
    build_summary,
)
from tests.fuzz.bounds import FUZZ, reading_or_error
from tests.fuzz.mutate import mutated

WHERE = "fuzzhost:/models/step-100"
CONFIG = {
    "model_type": "qwen3",
    "hidden_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "vocab_size": 256,
    "dflash_config": {"block_size": 4, "mask_token_id": 255, "target_layer_ids": [1, 3]},
}
FILE = save(
    {
        "fc.weight": torch.zeros(64, 128, dtype=torch.bfloat16),
        "layers.0.self_attn.q_proj.weight": torch.zeros(64, 64, dtype=torch.bfloat16),
        "norm.weight": torch.zeros(64, dtype=torch.float32),
    },
    metadata={"format": "pt"},
)
(HEADER_LEN,) = struct.unpack("<Q", FILE[:8])
HEADER = json.loads(FILE[8 : 8 + HEADER_LEN])


def _summary(
    config: bytes | None, header: bytes, size: int = len(FILE)
) -> CheckpointSummary | BaseException:
    files = [("model.safetensors", size, header, None)]
    got = reading_or_error(
        lambda: build_summary(WHERE, config, None, files, 0), (CheckpointError,), WHERE
    )
    if isinstance(got, CheckpointSummary):
        json.dumps(got.as_dict(), allow_nan=True)
        got.unscorable  # noqa: B018  (what the board and eval read)
    return got


def test_the_written_checkpoint_reads_as_a_drafter() -> None:
    got = _summary(json.dumps(CONFIG).encode(), FILE[8 : 8 + HEADER_LEN])
    assert isinstance(got, CheckpointSummary) and got.kind == "drafter"


@FUZZ
@given(mutated(HEADER, extra_keys=("__metadata__", "fc.weight")), st.integers(0, 2 * len(FILE)))
def test_safetensors_headers_give_a_summary_or_an_error_naming_the_place(
    header: Any, size: int
) -> None:
    _summary(json.dumps(CONFIG).encode(), json.dumps(header, allow_nan=True).encode(), size)


@FUZZ
@given(
    mutated(
        CONFIG,
        extra_keys=("dflash_config", "head_dim", "layer_types", "sliding_window", "text_config"),
    )
)
def test_drafter_configs_give_a_summary_or_an_error_naming_the_place(config: Any) -> None:
    _summary(json.dumps(config, allow_nan=True).encode(), FILE[8 : 8 + HEADER_LEN])


@FUZZ
@given(st.binary(max_size=200), st.binary(max_size=200) | st.just(b"{}"))
def test_any_bytes_as_header_and_config(header: bytes, config: bytes) -> None:
    _summary(config, header)


def _frames() -> bytes:
    config = json.dumps(CONFIG).encode()
    header = FILE[8 : 8 + HEADER_LEN]
    return (
        f"F config config.json {len(config)} {len(config)}\n".encode()
        + config
        + f"F header model.safetensors {len(FILE)} {len(header)}\n".encode()
        + header
        + b"M model-00002.safetensors\n"
        + b"H model.safetensors "
        + b"ab" * 32
        + b"\n"
    )


FRAMES = _frames()


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(FRAMES) - 1),
            st.sampled_from([b" ", b"\n", b"-", b"9", b"x", b"", b"F", b"X "]),
        ),
        max_size=4,
    ),
    st.integers(0, len(FRAMES)),
)
def test_the_inspect_scripts_frames_give_records_or_an_error_naming_the_place(
    edits: list[tuple[int, bytes]], keep: int
) -> None:
    out = bytearray(FRAMES[:keep])
    for at, piece in edits:
        out[at : at + 1] = piece
    reading_or_error(lambda: _parse_frames(bytes(out), WHERE), (CheckpointError,), WHERE)


def test_a_garbled_frame_is_an_error_naming_the_place() -> None:
    """Found by the fuzzer: `F header` cut short raised ValueError from tuple unpacking,
    and a negative length would have moved the reader backwards."""
    for garbled in (
        b"F header\n",
        b"F header x.safetensors 10 -5\nabc",
        b"F config c 1 zz\n{",
        b"H\n",
    ):
        got = reading_or_error(
            lambda garbled=garbled: _parse_frames(garbled, WHERE), (CheckpointError,), WHERE
        )
        assert garbled.startswith(b"H") or isinstance(got, CheckpointError)


def test_a_config_with_a_trillion_layers_is_refused_not_listed() -> None:
    """Found by the fuzzer: num_hidden_layers 2**70 made the drafter rules build a list of
    that many layer types (inspect, and the harness on the eval host, never returned)."""
    config = {**CONFIG, "num_hidden_layers": 2**70}
    got = _summary(json.dumps(config).encode(), FILE[8 : 8 + HEADER_LEN])
    assert isinstance(got, CheckpointSummary)
    assert any("num_hidden_layers" in line for line in got.problems), got.problems


def test_a_shape_that_is_no_whole_number_is_an_error_naming_the_place() -> None:
    """Found by the fuzzer (bench profile): a shape of [inf] raised OverflowError from
    int(inf); 1.5 and "12" were read as 1 and 12."""
    for odd in (float("inf"), 1.5, "12", True, -1):
        header = {**HEADER, "norm.weight": {**HEADER["norm.weight"], "shape": [odd]}}
        got = _summary(json.dumps(CONFIG).encode(), json.dumps(header).encode())
        assert isinstance(got, CheckpointError), odd
        assert "norm.weight" in str(got)
