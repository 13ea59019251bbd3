"""Fuzz hosts.toml: the demo's own config with its values swapped, and raw text.

Every outcome is a Config or a ConfigError whose every problem names the file
(ConfigProblem's `path:line: key: message`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import tomllib
from hypothesis import given
from hypothesis import strategies as st

from dflash_tui.core.config import Config, ConfigError
from dflash_tui.core.config_parse import parse_config
from tests.fuzz.bounds import FUZZ, reading_or_error

DEMO = (Path(__file__).resolve().parents[2] / "hosts.toml").read_text(encoding="utf-8")
PATH = Path("/fuzz/hosts.toml")


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    inner = ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items())
    return "{" + inner + "}"


def to_toml(doc: dict[str, Any], prefix: str = "") -> str:
    """TOML text for a document of scalars, lists, tables and arrays of tables."""
    out: list[str] = []
    tables: list[tuple[str, Any]] = []
    for key, value in doc.items():
        if isinstance(value, dict) or (
            isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        ):
            tables.append((key, value))
        else:
            out.append(f"{_toml_string(key)} = {_toml_value(value)}")
    for key, value in tables:
        name = f"{prefix}.{_toml_string(key)}" if prefix else _toml_string(key)
        if isinstance(value, dict):
            out.append(f"[{name}]")
            out.append(to_toml(value, name))
        else:
            for item in value:
                out.append(f"[[{name}]]")
                out.append(to_toml(item, name))
    return "\n".join(out) + "\n"


_SCALAR = (
    st.text(max_size=12)
    | st.sampled_from(["", "~/x", "127.0.0.1", "-oProxyCommand=x", "a b", "http://[::1", "([", "*"])
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats()
    | st.booleans()
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(doc: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here] if here else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _paths(v, (*here, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _paths(v, (*here, i))
    return found


@st.composite
def mutated_demo(draw: st.DrawFn) -> str:
    doc = tomllib.loads(DEMO)
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[
                draw(
                    st.sampled_from(
                        ["jump", "port", "metrics", "exec_prefix", "x", "stall_after_s", "python"]
                    )
                )
            ] = draw(_VALUE)
        else:
            parent[path[-1]] = draw(_VALUE)
    return to_toml(doc)


def _check(text: str) -> None:
    got = reading_or_error(lambda: parse_config(text, PATH), (ConfigError,), str(PATH))
    if isinstance(got, ConfigError):
        assert got.problems and all(str(p).startswith(str(PATH)) for p in got.problems)
    else:
        assert isinstance(got, Config)


def test_the_writer_round_trips_the_demo() -> None:
    assert tomllib.loads(to_toml(tomllib.loads(DEMO))) == tomllib.loads(DEMO)


@FUZZ
@given(mutated_demo())
def test_a_demo_config_with_odd_values_is_read_or_refused_by_name(text: str) -> None:
    _check(text)


@FUZZ
@given(
    st.text(max_size=400)
    | st.builds(
        lambda cut, extra: DEMO[:cut] + extra, st.integers(0, len(DEMO)), st.text(max_size=20)
    )
)
def test_any_text_is_read_or_refused_by_name(text: str) -> None:
    _check(text)
