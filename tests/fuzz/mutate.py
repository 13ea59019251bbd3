"""Mutations of a JSON-like document: a value at a random place swapped, dropped, added."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["nan", "1e400", "", "cpu", "a/../b", "\x00", "0"]),
    st.lists(st.integers(-3, 3) | st.floats(), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
"""Values that a writer's bug, a truncation or a hostile file could leave in a field."""


def places(doc: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in `doc` (dict keys and list indices)."""
    found = [here] if here else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += places(value, (*here, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += places(value, (*here, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, original: Any, extra_keys: tuple[str, ...] = ()) -> Any:
    """`original` (deep-copied) with one to four values swapped, removed or added."""
    doc = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 4))):
        paths = places(doc)
        if not paths:
            return draw(ODD)
        path = draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["swap", "swap", "drop", "add"]))
        if action == "drop":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from([*extra_keys, "x"]))] = draw(ODD)
        else:
            parent[path[-1]] = draw(ODD)
    return doc
