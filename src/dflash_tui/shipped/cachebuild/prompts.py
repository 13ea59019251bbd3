"""Prompts from JSONL: one ``{"name", "prompt"}``, ``{"name", "messages"}`` or
``{"name", "input_ids"}`` object per line (docs/evals.md "Building a cache").

Text prompts go through the target's tokenizer and chat template as one user
turn with the generation prompt added; ``messages`` is a chat as the template
takes it; ``input_ids`` are used as they are. Every bad line is reported at
once, with its line number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError


@dataclass(frozen=True)
class Prompt:
    """One line of the prompts file; exactly one of text, messages, input_ids is set."""

    name: str
    line: int
    text: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    input_ids: tuple[int, ...] | None = None


def _parse(obj: Any, line: int, problems: list[str]) -> Prompt | None:
    where = f"line {line}"
    if not isinstance(obj, dict):
        problems.append(f"{where}: expected a JSON object, found {type(obj).__name__}")
        return None
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f'{where}: "name" must be a non-empty string, found {name!r}')
        return None
    given = [k for k in ("prompt", "messages", "input_ids") if k in obj]
    if len(given) != 1:
        problems.append(
            f'{where} ({name}): expected exactly one of "prompt", "messages", "input_ids"; '
            f"found {given or 'none'}"
        )
        return None
    key = given[0]
    value = obj[key]
    if key == "prompt":
        if not isinstance(value, str) or not value:
            problems.append(f'{where} ({name}): "prompt" must be a non-empty string')
            return None
        return Prompt(name, line, text=value)
    if key == "messages":
        ok = (
            isinstance(value, list)
            and value
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value)
        )
        if not ok:
            problems.append(
                f'{where} ({name}): "messages" must be a non-empty list of '
                '{"role": ..., "content": ...} objects'
            )
            return None
        return Prompt(name, line, messages=tuple(value))
    ok = (
        isinstance(value, list)
        and value
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value)
    )
    if not ok:
        problems.append(f'{where} ({name}): "input_ids" must be a non-empty list of token ids')
        return None
    return Prompt(name, line, input_ids=tuple(value))


def read_prompts(path: Path) -> list[Prompt]:
    """Every prompt in the file, in order; InputError lists every bad line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--prompts {path}: cannot read it ({exc})") from None
    prompts: list[Prompt] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: not JSON ({exc.msg} at column {exc.colno})")
            continue
        prompt = _parse(obj, number, problems)
        if prompt is not None:
            prompts.append(prompt)
    if problems:
        raise InputError(
            f"--prompts {path}: {len(problems)} bad line(s)",
            problems[:20],
            hint='one JSON object per line: {"name": ..., "prompt": "..."} or '
            '{"name": ..., "input_ids": [...]}',
        )
    if not prompts:
        raise InputError(f"--prompts {path}: no prompts in it")
    return prompts
