"""Training-log metrics from one clean line (docs/monitoring.md "What is read from each trainer and server").

The default parser reads `key=value`, `key: value` and `key value` tokens,
`VALUE UNIT` rates (`41.3 Ktok/s`, `12.5it/s`), tqdm's `N/TOTAL [` counter
(on a line that also carries metrics, so an eval bar is not a step),
and whole JSON-object lines. Keys are matched case-insensitively through
aliases (step/it/iter, loss, acc/accuracy, lr, tok/s, tokens/s, Ktok/s,
epoch, with `train/` or `train_` prefixes); `step 1200/70000` gives the step
and the total; throughput is normalised to tokens per second; per-position
accuracies are read from JSON or `[...]` lists (`acc_per_position`) and from
`acc_pos_N` / `acc_N` tokens. A leading `YYYY-MM-DD HH:MM:SS` timestamp, or
SpecForge's `MM/DD/YYYY HH:MM:SS`, is kept (as if UTC; only differences are
used, for throughput in steps/s).

The field's trainers and servers are read as they print (docs/monitoring.md
has one line of each): a tqdm bar (`n/total [elapsed<remaining, rate,
postfix]`) with a log line printed over it gives that line, the bar's
postfix filling only what it lacks; a bar alone gives its counter as a step
(`Metrics.bar`, which the history ignores once the log prints steps of its
own) and never a total. `Total training steps: N`, `Total optimization steps
= N` and SpecForge's `[N/TOTAL?]` are totals. `eval/`, `val/` keys are
`eval_loss` / `eval_acc`, never the training ones; `position K, Acc: x`
(SpecForge's EAGLE3 script) is one position's accuracy. A record that rich
wraps over indented lines (speculators at 80 columns) is joined: the values of
its first lines fill the line that names the step. vLLM's and SGLang's
speculative-decoding reports give `accept_len` (and vLLM's per-position
rates), their generation throughput `tok_s`.

A run's `metric_patterns` (regexes with named groups step, total, loss, acc,
lr, tok_s, ktok_s, epoch) replace the default parser for that run.

`MetricParser.parse` never raises: a line it cannot read gives None, which
the caller counts as unparsed.
"""

from __future__ import annotations

import calendar
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

FIELDS = ("loss", "acc", "lr", "tok_s", "epoch", "tokens")
"""Scalar metrics a point can carry besides its step."""


@dataclass(slots=True)
class Metrics:
    """What one log line said. Every field is optional; `time` is the line's own timestamp.

    `bar`: the step is a progress bar's counter (tqdm's n), not one the log printed.
    `eval_*`: evaluation metrics (`eval/`, `val/`), never the training ones.
    `acc_position`: one position's accuracy on a line of its own (index, value).
    `accept_len` / `accept_per_position`: a serving engine's report (docs/monitoring.md "Served acceptance").
    Treated as immutable; not a frozen dataclass because one is built per log line
    and a frozen one costs ~0.4 us more to build (a third of this module's overhead).
    """

    step: int | None = None
    total: int | None = None
    loss: float | None = None
    acc: float | None = None
    lr: float | None = None
    tok_s: float | None = None
    epoch: float | None = None
    tokens: float | None = None  # tokens seen so far, the trainer's own count
    acc_per_position: tuple[float, ...] | None = None
    time: float | None = None
    bar: bool = False
    eval_loss: float | None = None
    eval_acc: float | None = None
    acc_position: tuple[int, float] | None = None
    accept_len: float | None = None
    accept_per_position: tuple[float, ...] | None = None

    @property
    def has_values(self) -> bool:
        """True when the line carries a metric value (not only a step or a total)."""
        return (
            self.loss is not None
            or self.acc is not None
            or self.lr is not None
            or self.tok_s is not None
            or self.epoch is not None
            or self.tokens is not None
            or self.acc_per_position is not None
            or self.accept_len is not None
        )

    @property
    def says_anything(self) -> bool:
        """True when the line is worth keeping: a step, a total, a value, an eval metric."""
        return (
            self.step is not None
            or self.total is not None
            or self.has_values
            or self.eval_loss is not None
            or self.eval_acc is not None
            or self.acc_position is not None
        )


# --------------------------------------------------------------------------- aliases

_STEP_KEYS = ("step", "steps", "it", "iter", "iters", "iteration", "global_step")
_SCALE: dict[str, tuple[str, float]] = {}
for _k in _STEP_KEYS:
    _SCALE[_k] = ("step", 1.0)
for _k in ("loss", "train_loss"):
    _SCALE[_k] = ("loss", 1.0)
for _k in ("acc", "accuracy", "train_acc", "train_accuracy", "full_acc"):
    _SCALE[_k] = ("acc", 1.0)
for _k in ("lr", "learning_rate"):
    _SCALE[_k] = ("lr", 1.0)
for _k in ("epoch", "ep"):
    _SCALE[_k] = ("epoch", 1.0)
for _k in (
    *(f"{base}/{per}" for base in ("tok", "toks", "tokens") for per in ("s", "sec")),
    "tok_s",
    "tokens_s",
    "tokens_per_s",
    "tokens_per_sec",
    "tokens_per_second",
):
    _SCALE[_k] = ("tok_s", 1.0)
    _SCALE["k" + _k] = ("tok_s", 1e3)
    _SCALE["m" + _k] = ("tok_s", 1e6)
_SCALE["ktok_s"] = ("tok_s", 1e3)
# Tokens seen so far (HF Trainer's num_input_tokens_seen; Megatron's consumed tokens).
for _k in ("tokens_seen", "num_tokens_seen", "num_input_tokens_seen", "consumed_tokens",
           "tokens_consumed", "total_tokens_seen", "tokens_trained"):  # fmt: skip
    _SCALE[_k] = ("tokens", 1.0)
_SCALE["total"] = ("total", 1.0)
_SCALE["total_steps"] = ("total", 1.0)
_SCALE["max_steps"] = ("total", 1.0)

_LIST_KEYS = {
    "acc_per_position",
    "per_position_acc",
    "acc_per_pos",
    "position_acc",
    "pos_acc",
    "acc_by_position",
    "per_position_accuracy",
    "accuracy_per_position",
}
_POSITION_KEY = re.compile(
    r"^(?:train[/_.])?(?:acc|accuracy)(?:_pos|_position|@|_|pos)_?(\d{1,3})$"
    r"|^(?:train[/_.])?(?:pos|position)_?(\d{1,3})_?(?:acc|accuracy)$"
    r"|^(?:train[/_.])?full_acc_(\d{1,3})$"
)
_PREFIXES = ("train/", "train_", "train.", "metrics/", "metrics.", "profile/", "perf/")
_EVAL_PREFIXES = ("eval/", "eval_", "eval.", "val/", "val_", "valid/", "validation/")
"""Keys under these are evaluation metrics: kept apart from the training ones."""


def _canonical(key: str) -> tuple[str, float] | None:
    key = key.lower()
    hit = _SCALE.get(key)
    if hit is None:
        for prefix in _PREFIXES:
            if key.startswith(prefix):
                return _SCALE.get(key[len(prefix) :])
    return hit


def _eval_field(key: str) -> str | None:
    """`eval_loss` / `eval_acc` for an evaluation key (`eval/avg_acc`, `val/loss_epoch`)."""
    for prefix in _EVAL_PREFIXES:
        if key.startswith(prefix):
            rest = key[len(prefix) :].removeprefix("avg_").removesuffix("_epoch")
            hit = _SCALE.get(rest)
            if hit is not None and hit[0] in ("loss", "acc"):
                return "eval_" + hit[0]
            return None
    return None


def _is_eval(key: str) -> bool:
    return key.lower().startswith(_EVAL_PREFIXES)


# --------------------------------------------------------------------------- tokens

# A line is cut into words and the separators between them. A key pairs with
# the next word only across `=`, `:`, blanks and quotes (`loss | 1.4` is not a
# pair), and `it` only across `=` or `:` ("made it 3 times" is no step).
_SPLIT = re.compile(r"([\s|,;=:\[\](){}<>\"']+)")
_PAIR_SEP = frozenset(" \t=:'\"")
_RATE_UNIT = re.compile(r"^([kKmM]?(?:tok|toks|tokens)/s(?:ec)?|it/s)$")
_GLUED_RATE = re.compile(
    r"^([-+]?(?:\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][-+]?\d{1,4})?)"
    r"([kKmM]?(?:tok|toks|tokens)/s(?:ec)?|it/s)$"
)
_STRICT_KEYS = frozenset({"it", "ep"})
_STAMP = re.compile(
    r"^\W{0,3}(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?(Z|[+-]\d\d:?\d\d)?"
)
# SpecForge's scripts (and Hugging Face's examples): `datefmt="%m/%d/%Y %H:%M:%S"`.
_STAMP_MDY = re.compile(r"^\W{0,3}(\d\d)/(\d\d)/(\d{4}) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")
_DIGIT = re.compile(r"\d")
# tqdm: `{n}/{total} [{elapsed}<{remaining}, {rate}{postfix}]` (the bracket is tqdm's own).
_BAR = re.compile(r"(\d+)/(\d+) \[[^\]<]*<([^\]]*)\]")
# `Total training steps: 52860` (SpecForge), `Total optimization steps = 1,000` (HF Trainer).
_ANNOUNCED_TOTAL = re.compile(
    r"\b[Tt]otal(?: training| train| optimi[sz]ation)? steps\s?[:=]\s*(\d[\d,]*)"
)
# Serving logs (docs/monitoring.md "Served acceptance"): vLLM's spec-decode logger, old and new, and SGLang's scheduler.
_VLLM_LENGTH = re.compile(r"Mean acceptance length: ([\d.]+)")
_VLLM_POSITIONS = re.compile(r"Per-position acceptance rate: (\d[\d.]*(?:, \d[\d.]*)*)")
_VLLM_V0 = re.compile(r"System efficiency: ([\d.]+), Number of speculative tokens: (\d+)")
_SGLANG_LENGTH = re.compile(r"accept len: ([\d.]+)")
_SGLANG_RATE = re.compile(r"gen throughput \(token/s\): ([\d.]+)")
_VLLM_RATE = re.compile(r"Avg generation throughput: ([\d.]+) tokens/s")


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _step(value: float | None) -> int | None:
    if value is None or value < 0 or value != int(value) or value > 1e15:
        return None
    return int(value)


def line_time(line: str) -> float | None:
    """Seconds since the epoch of a leading stamp: `YYYY-MM-DD HH:MM:SS[.fff][Z|+hh:mm]`
    or SpecForge's `MM/DD/YYYY HH:MM:SS` (read as UTC: only differences are used)."""
    m = _STAMP.match(line)
    if m is not None:
        date = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    else:
        m = _STAMP_MDY.match(line)
        if m is None:
            return None
        date = (int(m.group(3)), int(m.group(1)), int(m.group(2)))
    seconds = _utc_seconds(date, (int(m.group(4)), int(m.group(5)), int(m.group(6))))
    if seconds is None:
        return None
    if m.group(7):
        seconds += float("0." + m.group(7))
    zone = m.group(8) if m.re is _STAMP else None
    if zone and zone != "Z":
        sign = -1 if zone[0] == "+" else 1
        digits = zone[1:].replace(":", "")
        seconds += sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return seconds


def _utc_seconds(date: tuple[int, int, int], clock: tuple[int, int, int]) -> float | None:
    """Seconds of a calendar date and time, None for one no calendar has (month 13)."""
    year, month, day = date
    if not (1 <= month <= 12 and 1 <= day <= 31 and clock[0] < 24 and clock[1] < 60):
        return None
    try:
        return float(calendar.timegm((year, month, day, *clock, 0, 0, 0)))
    except (ValueError, OverflowError):  # year 0
        return None


# --------------------------------------------------------------------------- the parser


class _Builder:
    """Collects fields of one line; the first value seen for a field wins."""

    __slots__ = ("acc_pos", "found", "position", "positions", "values")

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        self.positions: dict[int, float] = {}
        self.acc_pos: tuple[float, ...] | None = None
        self.found = False
        self.position: int | None = None  # `position K, Acc: x` (one position per line)

    def put(
        self, key: str, value: float | None, *, pct: bool = False, tot: str | None = None
    ) -> None:
        if value is None:
            return
        canon = _canonical(key)
        if canon is None:
            lower = key.lower()
            m = _POSITION_KEY.match(lower) if "acc" in lower else None
            if m is not None:
                index = int(m.group(1) or m.group(2) or m.group(3))
                if 0 <= value <= (100 if pct else 1):
                    self.positions.setdefault(index, value / 100 if pct else value)
                    self.found = True
            elif "/" in lower or "_" in lower:
                field = _eval_field(lower)
                if field is not None and field not in self.values:
                    self.values[field] = value / 100 if pct and field == "eval_acc" else value
                    self.found = True
            return
        name, scale = canon
        if name == "acc" and pct:
            value /= 100.0
        if name == "acc" and self.position is not None:
            self.positions.setdefault(self.position, value)
            self.found = True
            return
        if name not in self.values:
            self.values[name] = value * scale
            self.found = True
        if tot is not None and name == "step" and "total" not in self.values:
            total = _number(tot)
            if total is not None:
                self.values["total"] = total

    def put_list(self, key: str, items: Iterable[Any]) -> None:
        if key.lower() not in _LIST_KEYS or self.acc_pos is not None:
            return
        values = []
        for item in items:
            value = _number(item) if isinstance(item, str) else _as_float(item)
            if value is None or not 0 <= value <= 1:
                return
            values.append(value)
        if values:
            self.acc_pos = tuple(values)
            self.found = True

    def build(self, time: float | None, *, bar: bool = False) -> Metrics | None:
        if not self.found:
            return None
        v = self.values
        step = _step(v.get("step"))
        total = _step(v.get("total"))
        per_position = self.acc_pos
        acc_position = None
        if self.position is not None and len(self.positions) == 1 and per_position is None:
            acc_position = next(iter(self.positions.items()))
        elif per_position is None and self.positions:
            per_position = tuple(self.positions[k] for k in sorted(self.positions))
        metrics = Metrics(
            step=step,
            total=total if total else None,
            loss=v.get("loss"),
            acc=v.get("acc"),
            lr=v.get("lr"),
            tok_s=v.get("tok_s"),
            epoch=v.get("epoch"),
            tokens=v.get("tokens"),
            acc_per_position=per_position,
            time=time,
            bar=bar and step is not None,
            eval_loss=v.get("eval_loss"),
            eval_acc=v.get("eval_acc"),
            acc_position=acc_position,
        )
        if not metrics.says_anything:
            return None
        return metrics


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


class MetricParser:
    """Parses clean log lines into `Metrics`; see the module docstring for the formats."""

    def __init__(self, patterns: Sequence[str] = ()) -> None:
        self.patterns = tuple(re.compile(p) for p in patterns)
        self._carry: Metrics | None = None

    @property
    def custom(self) -> bool:
        return bool(self.patterns)

    def parse(self, line: str) -> Metrics | None:
        """The metrics on `line`, or None when it carries none. Never raises."""
        try:
            if self.patterns:
                return self._parse_custom(line)
            metrics = self._parse_default(line)
        except Exception:  # a log line must never take the console down
            self._carry = None
            return None
        # A record wrapped over indented lines (rich's log handler at 80 columns): the
        # values of its first lines join the line that finally names the step.
        if metrics is None:
            self._carry = None
            return None
        carry = self._carry
        if carry is not None and line[:1] == " ":
            metrics = _fill(metrics, carry)
        stepless = metrics.step is None and metrics.accept_len is None
        self._carry = metrics if stepless and metrics.has_values else None
        return metrics

    # ------------------------------------------------------------------ default

    def _parse_default(self, line: str) -> Metrics | None:
        if not _DIGIT.search(line):
            return None
        stripped = line.strip()
        if stripped.startswith("{") and stripped.endswith("}"):
            parsed = self._parse_json(stripped)
            if parsed is not None:
                return parsed
        if "ccept" in line or "generation throughput" in line:
            served = _served(line)
            if served is not None:
                return served
        if "<" in line and " [" in line:
            bar = _BAR.search(line)
            if bar is not None:
                return self._parse_bar(line, bar)
        b = _Builder()
        if "otal" in line:
            announced = _ANNOUNCED_TOTAL.search(line)
            if announced is not None:
                b.put("total", _number(announced.group(1).replace(",", "")))
                line = line[: announced.start()] + line[announced.end() :]
        _scan(b, line)
        stamp = line_time(line) if line[:1].isdigit() or line[:1] == "[" else None
        return b.build(stamp)

    def _parse_bar(self, line: str, bar: re.Match[str]) -> Metrics | None:
        """A tqdm bar: a log line printed over the bar wins (the bar's postfix, one
        batch's values, fills only what that line lacks); a bar alone gives its counter
        as a step only with values in its postfix, and never a total."""
        rest = line[bar.end() :]
        if _DIGIT.search(rest):
            after = self._parse_default(rest)
            if after is not None:
                if after.loss is None or after.acc is None:
                    postfix = _Builder()
                    _scan(postfix, bar.group(3))
                    values = postfix.build(None)
                    if values is not None:
                        after = _fill(after, values)
                return after
        b = _Builder()
        _scan(b, bar.group(3))
        if not b.found or "step" in b.values:
            return b.build(None)
        b.put("step", _number(bar.group(1)))
        return b.build(None, bar=True)

    def _parse_json(self, text: str) -> Metrics | None:
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(doc, dict):
            return None
        b = _Builder()
        stamp = _json_into(b, doc, "", 0)
        return b.build(stamp)

    # ------------------------------------------------------------------ custom

    def _parse_custom(self, line: str) -> Metrics | None:
        b = _Builder()
        for pattern in self.patterns:
            m = pattern.search(line)
            if m is None:
                continue
            for name, text in m.groupdict().items():
                if text is None:
                    continue
                if name == "tok_s":
                    b.put("tok/s", _number(text))
                elif name == "ktok_s":
                    b.put("ktok/s", _number(text))
                elif name in ("step", "total", *FIELDS):
                    b.put(name, _number(text))
        return b.build(line_time(line))


_FILLED = (
    "loss",
    "acc",
    "lr",
    "tok_s",
    "epoch",
    "tokens",
    "acc_per_position",
    "eval_loss",
    "eval_acc",
)


def _fill(m: Metrics, carry: Metrics) -> Metrics:
    """`m` with the fields it lacks taken from `carry` (earlier lines of the same record)."""
    missing = {
        name: getattr(carry, name)
        for name in _FILLED
        if getattr(m, name) is None and getattr(carry, name) is not None
    }
    if m.acc_per_position is not None and carry.acc_per_position is not None:
        missing["acc_per_position"] = carry.acc_per_position + m.acc_per_position
    if m.time is None and carry.time is not None:
        missing["time"] = carry.time
    return replace(m, **missing) if missing else m


def _served(line: str) -> Metrics | None:
    """A serving engine's speculative-decoding report (docs/monitoring.md "Served acceptance"), or None."""
    stamp = line_time(line) if line[:1].isdigit() or line[:1] == "[" else None
    if "SpecDecoding metrics:" in line:
        length = _VLLM_LENGTH.search(line)
        if length is None:  # vLLM 0.8.x's first form: rates only, no length to read
            return None
        positions = _VLLM_POSITIONS.search(line)
        rates = None
        if positions is not None:
            values = [_number(x) for x in positions.group(1).split(", ")]
            if all(v is not None and 0 <= v <= 1 for v in values):
                rates = tuple(v for v in values if v is not None)
        return Metrics(
            accept_len=_number(length.group(1)), accept_per_position=rates or None, time=stamp
        )
    if "Speculative metrics:" in line:  # vLLM V0: emitted / (k + 1) per step is the efficiency
        v0 = _VLLM_V0.search(line)
        if v0 is None:
            return None
        efficiency = _number(v0.group(1))
        if efficiency is None:
            return None
        return Metrics(accept_len=efficiency * (int(v0.group(2)) + 1), time=stamp)
    if "accept len:" in line:
        length = _SGLANG_LENGTH.search(line)
        if length is None:
            return None
        rate = _SGLANG_RATE.search(line)
        return Metrics(
            accept_len=_number(length.group(1)),
            tok_s=_number(rate.group(1)) if rate is not None else None,
            time=stamp,
        )
    if "generation throughput" in line:
        rate = _VLLM_RATE.search(line)
        if rate is not None:
            return Metrics(tok_s=_number(rate.group(1)), time=stamp)
    return None


def _scan(b: _Builder, line: str) -> None:
    """Fill `b` from the tokens of `line`."""
    parts = _SPLIT.split(line)
    n = len(parts)
    i = 0
    while i < n:
        word = parts[i]
        if not word:
            i += 2
            continue
        first = word[0]
        if first.isalpha():
            i = _read_pair(b, parts, i, word)
            continue
        if first.isdigit() or first in "+-.":
            glued = _GLUED_RATE.match(word) if word.endswith(("/s", "/sec")) else None
            if glued is not None:
                _put_rate(b, glued.group(2), glued.group(1))
            elif i + 2 < n and parts[i + 1].strip(" \t") == "" and _RATE_UNIT.match(parts[i + 2]):
                _put_rate(b, parts[i + 2], word)
                i += 4
                continue
            elif word.endswith("?") and "/" in word and i > 0 and "[" in parts[i - 1]:
                # SpecForge's `Step N [N/TOTAL?]`: the total it expects.
                total = word[:-1].partition("/")[2]
                if total.isdigit():
                    b.put("total", float(total))
        i += 2


def _put_rate(b: _Builder, unit: str, number: str) -> None:
    unit = unit.lower()
    if unit != "it/s":  # iterations per second: not a metric we keep
        b.put(unit, _number(number))


def _value(word: str) -> tuple[float | None, str | None, bool]:
    """A value word: number, optional `/total`, optional `%`."""
    pct = word.endswith("%")
    if pct:
        word = word[:-1]
    number, slash, total = word.partition("/")
    return _number(number), (total if slash and total.isdigit() else None), pct


def _read_pair(b: _Builder, parts: list[str], i: int, word: str) -> int:
    """Read `word` as a key paired with the next word; returns the next index to look at."""
    key = word.lower()
    if i + 2 >= len(parts):
        return i + 2
    sep = parts[i + 1]
    if key in _LIST_KEYS and "[" in sep:
        items = []
        j = i + 2
        while j < len(parts):
            items.append(parts[j])
            if j + 1 >= len(parts) or "]" in parts[j + 1]:
                break
            j += 2
        b.put_list(key, items)
        return j + 2
    if not _PAIR_SEP.issuperset(sep):
        return i + 2
    if key in _STRICT_KEYS and "=" not in sep and ":" not in sep:
        return i + 2
    value, total, pct = _value(parts[i + 2])
    if value is None:
        return i + 2
    if key == "position":
        if value == int(value) and 0 <= value < 1000:
            b.position = int(value)
        return i + 4
    b.put(key, value, pct=pct, tot=total)
    return i + 4


def _json_into(b: _Builder, doc: Mapping[str, Any], prefix: str, depth: int) -> float | None:
    """Fill `b` from a JSON object (one level of nesting is flattened); returns its timestamp."""
    stamp = None
    for key, value in doc.items():
        if not isinstance(key, str):
            continue
        full = f"{prefix}{key}"
        if isinstance(value, dict) and depth < 2:
            inner = _json_into(b, value, f"{full}/", depth + 1)
            stamp = stamp if stamp is not None else inner
        elif isinstance(value, list):
            b.put_list(key, value)
        elif isinstance(value, str):
            if key.lower() in ("time", "timestamp", "ts", "date", "datetime"):
                stamp = stamp if stamp is not None else line_time(value)
            else:
                number = _number(value) if _DIGIT.search(value) else None
                if number is not None:
                    _put_json(b, full, key, number)
        else:
            number = _as_float(value)
            if number is None:
                continue
            if key.lower() in ("time", "timestamp", "ts", "_timestamp", "wall_time"):
                stamp = stamp if stamp is not None else number
            else:
                _put_json(b, full, key, number)
    return stamp


def _put_json(b: _Builder, full: str, key: str, value: float) -> None:
    if _is_eval(full):
        b.put(full, value)
    else:
        b.put(full if _canonical(full) is not None else key, value)
