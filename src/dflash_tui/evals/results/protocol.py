"""The protocol a number was measured under, compared (docs/evals.md "The protocol").

A cache built with `--dataset` records its protocol (dataset, formatter, rows picked,
`thinking`, the chat template, `max_new_tokens`); the served bench copies it into its
settings (`protocol`, the sample ids as a hash). Two numbers are alike only when their
protocols are: `unlike_protocol` names each field that differs, in the words the board
uses, and `departures` says how a protocol differs from z-lab's published one, so a
table of "speedup / tau" never passes another protocol's number off as the field's.
No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

ZLAB_MAX_NEW_TOKENS = 2048  # z-lab's benchmark's --max-new-tokens default
ZLAB_FORMATTER_PREFIX = "zlab-"  # the cache builder's formatters of z-lab's five datasets
NO_PROTOCOL = "no protocol recorded"

Protocol = Mapping[str, Any]


def _get(*keys: str) -> Callable[[Protocol], Any]:
    return lambda p: tuple(repr(p.get(k)) for k in keys)


# the field's name on the board -> what of the protocol block it covers
FIELDS: dict[str, Callable[[Protocol], Any]] = {
    "dataset": _get("dataset", "config", "split", "rows_sha256", "formatter"),
    "thinking": _get("thinking"),
    "template": _get("chat_template_sha256"),
    "max_new_tokens": _get("max_new_tokens"),
    # a bench's settings hash the ids (samples_sha256); a results file has them all
    "samples": _get("selection", "samples", "samples_sha256", "sample_ids"),
}


def protocol_of(settings: Mapping[str, Any] | None) -> Protocol | None:
    """The protocol block in a served row's settings; None for a bench on a --prompts cache
    (or one run before benches recorded it)."""
    block = (settings or {}).get("protocol")
    return block if isinstance(block, Mapping) else None


def unlike_protocol(protocols: Sequence[Protocol | None]) -> list[str]:
    """The board's names of the protocol fields that differ between `protocols` (empty: all
    alike); "protocol" alone when some have one and some none."""
    if len(protocols) < 2:
        return []
    recorded = [p for p in protocols if p is not None]
    if not recorded:
        return []
    if len(recorded) < len(protocols):
        return ["protocol"]
    return [name for name, key in FIELDS.items() if len({key(p) for p in recorded}) > 1]


def departures(protocol: Protocol | None) -> list[str]:
    """How `protocol` differs from z-lab's published one (empty: it is z-lab's)."""
    if protocol is None:
        return [NO_PROTOCOL]
    out = []
    formatter = protocol.get("formatter")
    name = formatter.get("name") if isinstance(formatter, Mapping) else None
    if not (isinstance(name, str) and name.startswith(ZLAB_FORMATTER_PREFIX)):
        out.append(f"formatter {name or '?'}")
    if protocol.get("thinking"):
        out.append("thinking on")
    tokens = protocol.get("max_new_tokens")
    if tokens != ZLAB_MAX_NEW_TOKENS:
        out.append(f"max_new_tokens {tokens}")
    return out


def column_label(suite: str, protocols: Sequence[Protocol | None]) -> str:
    """A dataset table's column head: the dataset (the suite's name when it has none), and
    what keeps it from being z-lab's protocol or one protocol at all."""
    recorded = [p for p in protocols if p is not None]
    datasets = {str(p.get("dataset")) for p in recorded}
    if recorded and len(recorded) == len(protocols) and len(datasets) == 1:
        dataset = datasets.pop()
        name = dataset if dataset == suite else f"{dataset} ({suite})"
    else:
        name = suite
    notes = []
    differ = unlike_protocol(protocols)
    if differ:
        notes.append("protocols differ: " + ", ".join(differ))
    else:
        found = departures(protocols[0] if protocols else None)
        if found:
            notes.append("not z-lab's protocol: " + ", ".join(found))
    return f"{name} [{'; '.join(notes)}]" if notes else name
