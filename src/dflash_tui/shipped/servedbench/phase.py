"""One engine's life in a bench: start, health, what it reports of itself, requests, stop.

What the engine actually ran with is read from the engine, not from what was
asked: `dtype` from its own start-up log (vLLM's "with config: ... dtype=torch.X",
SGLang's "Load weight end. ... dtype=torch.X"), else from the argv as started (the
host's engine command may carry its own `--dtype`), else "auto" as asked.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..common.errors import RunFailure
from .client import Counters, http_get, post_json, read_counters
from .engine import Engine, EngineSpec
from .perrequest import Counts, from_sglang, from_vllm_response
from .prompts import Prompt

if TYPE_CHECKING:
    from .options import Options

Emit = Callable[[dict[str, Any]], None]
DYING_S = 10.0  # how long a failed request waits for the engine's exit before blaming the request
_LOG_DTYPE = re.compile(r"\bdtype=torch\.([a-z0-9_]+)")


def argv_dtype(argv: Sequence[str]) -> str | None:
    """The last `--dtype X` or `--dtype=X` of an engine's argv (None: it has none)."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--dtype" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--dtype="):
            found = arg.split("=", 1)[1]
    return found


def ran_dtype(argv: Sequence[str], log_lines: Sequence[str], asked: str) -> tuple[str, str]:
    """(dtype, where it was read): the engine's log, else its argv, else what was asked."""
    for line in log_lines:
        m = _LOG_DTYPE.search(line)
        if m:
            return m.group(1), "engine log"
    given = argv_dtype(argv)
    if given is not None:
        return given, "engine argv"
    return asked, "asked"


@dataclass(frozen=True)
class Answer:
    """One request's reply: its token counts and, where the engine gave them, its spec counts."""

    prompt_tokens: int
    output_tokens: int
    counts: Counts | None


class Phase:
    """One engine's life: start, health, the prompts task by task, stop (always)."""

    def __init__(self, opts: Options, name: str, drafter: str | None, port: int, emit: Emit):
        self.opts, self.name, self.emit = opts, name, emit
        spec = EngineSpec(
            opts.engine, opts.command, opts.target, drafter, opts.k, opts.dtype, port, opts.extra
        )
        self.engine = Engine(spec, opts.out.parent / f"engine-{name}.log")
        self.version: str | None = None

    def __enter__(self) -> Phase:
        self.emit({"event": "phase", "phase": self.name, "state": "starting"})
        self.engine.start()
        try:
            self.engine.wait_healthy(self.opts.health_timeout_s, lambda _w: None)
        except BaseException:
            self.engine.stop()  # no __exit__ for a failed __enter__
            raise
        self.version = self._version()
        self.emit({"event": "phase", "phase": self.name, "state": "serving"})
        return self

    def __exit__(self, *_: object) -> None:
        self.engine.stop()

    def _version(self) -> str | None:
        path = "/get_server_info" if self.opts.engine == "sglang" else "/version"
        with contextlib.suppress(OSError, ValueError):
            status, body = http_get(f"{self.engine.url}{path}", timeout=5.0)
            if status == 200:
                version = json.loads(body).get("version")
                return None if version is None else str(version)
        return None

    def settings(self) -> dict[str, Any]:
        """What this engine ran with, as it reports it: dtype (and where that was read)."""
        log = self.engine.last_lines(2000)
        dtype, source = ran_dtype(self.engine.spec.argv(), log, self.opts.dtype)
        return {"dtype": dtype, "dtype_source": source}

    def counters(self) -> Counters:
        try:
            return read_counters(self.engine.url)
        except (OSError, ValueError) as exc:
            if self.engine.exits_within(DYING_S):
                raise self.engine.died("mid-run") from None
            raise RunFailure(f"cannot read {self.engine.url}/metrics: {exc}") from None

    def request(self, prompt: Prompt) -> Answer:
        """One greedy completion of `prompt`: its output tokens and the engine's own counts."""
        doc: dict[str, Any]
        if self.opts.engine == "sglang":
            url, doc = (
                f"{self.engine.url}/generate",
                {
                    "input_ids": list(prompt.input_ids),
                    "sampling_params": {
                        "temperature": 0,
                        "max_new_tokens": prompt.max_tokens,
                        "ignore_eos": True,
                    },
                },
            )
        else:
            url, doc = (
                f"{self.engine.url}/v1/completions",
                {
                    "model": "dflash-bench",
                    "prompt": list(prompt.input_ids),
                    "max_tokens": prompt.max_tokens,
                    "temperature": 0,
                    # the cached continuation ends where the target ended it (its end
                    # token included): exactly max_tokens, as the cache holds
                    "ignore_eos": True,
                },
            )
        try:
            status, body = post_json(url, doc, self.opts.request_timeout_s)
        except OSError as exc:
            if self.engine.exits_within(DYING_S):
                raise self.engine.died("mid-run") from None
            raise RunFailure(f"request to {url} failed: {exc}") from None
        if status != 200 or not isinstance(body, dict):
            if self.engine.exits_within(DYING_S):
                raise self.engine.died("mid-run")
            raise RunFailure(f"{url} answered {status}: {str(body)[:300]}")
        if self.opts.engine == "sglang":
            meta = body.get("meta_info") or {}
            return Answer(
                len(prompt.input_ids), int(meta.get("completion_tokens", 0)), from_sglang(meta)
            )
        usage = body.get("usage") or {}
        return Answer(
            len(prompt.input_ids),
            int(usage.get("completion_tokens", 0)),
            from_vllm_response(body),
        )
