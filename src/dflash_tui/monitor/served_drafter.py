"""Which drafter a serving run runs (docs/monitoring.md "A served drafter that collapsed").

From the run's `drafter = "CHECKPOINT"` key where given, else from its
server's command line as the liveness probe's `ps` shows it:

    vllm serve TARGET --speculative-config '{"method": "dflash", "model": PATH, ...}'
    vllm serve TARGET --speculative-config.model PATH
    python -m sglang.launch_server ... --speculative-draft-model-path PATH

`ps` joins argv with spaces and drops the shell's quotes, so the JSON is read
with a decoder that stops where the object ends, not by splitting words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from dflash_tui.monitor.liveness import ProcessInfo

_VLLM_JSON = re.compile(r"--speculative[-_]config(?:=|\s+)(?=\{)")
_VLLM_DOTTED = re.compile(r"--speculative[-_]config\.model(?:=|\s+)(\S+)")
_SGLANG = re.compile(r"--speculative[-_]draft[-_]model[-_]path(?:=|\s+)(\S+)")


def drafter_from_command(command: str) -> str | None:
    """The drafter model (a path or a hub name) a vLLM or SGLang command line names."""
    found = _SGLANG.search(command) or _VLLM_DOTTED.search(command)
    if found:
        return found.group(1)
    found = _VLLM_JSON.search(command)
    if found is None:
        return None
    try:
        spec, _ = json.JSONDecoder().raw_decode(command, found.end())
    except ValueError:
        return None
    model = spec.get("model") if isinstance(spec, dict) else None
    return model if isinstance(model, str) and model else None


def served_drafter(configured: str | None, processes: Iterable[ProcessInfo]) -> str | None:
    """The run's `drafter` key, else the first of its processes that names one."""
    if configured:
        return configured
    for process in processes:
        drafter = drafter_from_command(process.command)
        if drafter:
            return drafter
    return None
