"""The engine's HTTP endpoints, from the standard library: health, version, completions, metrics.

`/metrics` is Prometheus text; only the spec-decode counters are read, summed
over every label but `position` (vLLM labels them `model_name` and `engine`).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
SPEC_COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def http_get(url: str, timeout: float) -> tuple[int, bytes]:
    """(status, body) of a GET; OSError when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def post_json(url: str, doc: dict[str, Any], timeout: float) -> tuple[int, Any]:
    """(status, parsed JSON or text) of a POST; OSError when nothing answers."""
    data = json.dumps(doc).encode()
    req = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, body = int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        status, body = int(exc.code), exc.read()
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode("utf-8", "replace")


@dataclass(frozen=True)
class Counters:
    """One `/metrics` read of the spec-decode counters (None: the engine exports none)."""

    drafts: float | None
    draft_tokens: float | None
    accepted: float | None
    per_position: dict[int, float] = field(default_factory=dict)

    @property
    def has_spec(self) -> bool:
        return self.drafts is not None and self.accepted is not None


def parse_counters(text: str) -> Counters:
    """The spec-decode counters of a Prometheus text exposition."""
    sums: dict[str, float] = defaultdict(float)
    seen: set[str] = set()
    per_pos: dict[int, float] = defaultdict(float)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        try:
            number = float(value)
        except ValueError:
            continue
        if name == PER_POSITION:
            pos = dict(_LABEL.findall(labels)).get("position")
            if pos is not None and pos.isdigit():
                per_pos[int(pos)] += number
        elif name in SPEC_COUNTERS:
            sums[name] += number
            seen.add(name)
    return Counters(
        sums[DRAFTS] if DRAFTS in seen else None,
        sums[DRAFT_TOKENS] if DRAFT_TOKENS in seen else None,
        sums[ACCEPTED] if ACCEPTED in seen else None,
        dict(per_pos),
    )


def read_counters(base_url: str, timeout: float = 10.0) -> Counters:
    status, body = http_get(f"{base_url}/metrics", timeout)
    if status != 200:
        raise OSError(f"GET /metrics answered {status}")
    return parse_counters(body.decode("utf-8", "replace"))
