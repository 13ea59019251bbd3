"""TensorBoard events decoded with tensorboardX's protobuf messages (`proto.event_pb2`).

A record's data is one `Event`: its `step`, its `wall_time`, and either the
file's version line, a summary, or something we do not show (graphs,
session logs). A summary's values are scalars when they carry `simple_value`
(tensorboardX, and torch.utils.tensorboard by default) or a one-element float
tensor (torch's `new_style` scalars); images, histograms and text are skipped.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from dflash_tui.monitor.trackers import Scalar
from dflash_tui.monitor.trackers.tfrecord import INSTALL_HINT, MissingExtra, tensorboardx_module

_DT_FLOAT, _DT_DOUBLE = 1, 2


def event_decoder() -> Callable[[bytes], list[Scalar]]:
    """A function from one record's data to its scalars; ValueError when it is no Event.

    MissingExtra (with what to install) when tensorboardX is not installed here.
    """
    try:
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]  # no stubs in the lock

        event_pb2 = tensorboardx_module("proto.event_pb2")
    except ImportError:
        raise MissingExtra(
            f"reading TensorBoard event files needs tensorboardX: {INSTALL_HINT}"
        ) from None
    event_type: Any = event_pb2.Event

    def decode(data: bytes) -> list[Scalar]:
        try:
            event = event_type.FromString(data)
        except DecodeError as exc:
            raise ValueError(f"not a TensorBoard event: {exc}") from None
        if event.WhichOneof("what") != "summary":
            return []
        step, wall = int(event.step), float(event.wall_time) or None
        found = []
        for value in event.summary.value:
            number = _number(value)
            if number is not None:
                found.append(Scalar(step, value.tag, number, wall))
        return found

    return decode


def _number(value: Any) -> float | None:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    tensor = value.tensor
    if tensor.dtype == _DT_FLOAT:
        if len(tensor.float_val) == 1:
            return float(tensor.float_val[0])
        if len(tensor.tensor_content) == 4:
            return float(struct.unpack("<f", tensor.tensor_content)[0])
    elif tensor.dtype == _DT_DOUBLE:
        if len(tensor.double_val) == 1:
            return float(tensor.double_val[0])
        if len(tensor.tensor_content) == 8:
            return float(struct.unpack("<d", tensor.tensor_content)[0])
    return None
