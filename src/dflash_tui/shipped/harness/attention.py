"""Which keys a block query sees: the attention semantics of a run (docs/design.md "The block forward").

The field disagrees on ``sliding_attention`` layers of a DFlash drafter:

* ``bidirectional`` (the default): every key within the window on both sides,
  ``|query_position - key_position| < sliding_window``, block keys after the
  query included. z-lab's reference model and DDTree's copy of it run every
  layer non-causal and hand ``sliding_window`` to a flash-attention kernel,
  whose window is symmetric.
* ``causal``: keys at or before the query and within the window,
  ``query_position - sliding_window < key_position <= query_position``. vLLM's
  DFlash layer resolver makes sliding layers causal when the config says
  nothing.

A drafter config that states its own causality (``is_causal`` at the top level
or ``dflash_config.causal``, as vLLM and z-lab read them) decides for every
layer, full ones too, and nothing overrides it: an operator's ``--sliding``
that disagrees is reported, never applied. Context keys are always the
target features strictly before the anchor (and inside the window).

A config with ``use_sliding_window: false`` has no window at all: its
``sliding_attention`` layers attend as ``full_attention`` layers do, because
transformers' Qwen3Config then drops ``sliding_window`` and z-lab's model runs
full attention there. A ``qwen2``/``qwen3`` config without the key is the same
(the class's default is false). ``rules.parse_config`` turns them into full
layers; the results record how many (``windowless_layers``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BIDIRECTIONAL = "bidirectional"
CAUSAL = "causal"
SEMANTICS = (BIDIRECTIONAL, CAUSAL)
DEFAULT_SLIDING = BIDIRECTIONAL


@dataclass(frozen=True)
class Attention:
    """The resolved semantics of one run, and why it is what it is."""

    sliding: str  # for sliding_attention layers
    full: str  # for full_attention layers (causal only when the drafter's config says so)
    source: str  # "default", "--sliding" or "config.json <key>"
    sliding_layers: int = 0
    requested: str | None = None  # the operator's --sliding when the config overrode it
    # sliding_attention layers run as full_attention ones: use_sliding_window is not true
    windowless_layers: int = 0

    def causal(self, layer_type: str) -> bool:
        return (self.sliding if layer_type == "sliding_attention" else self.full) == CAUSAL

    @property
    def overridden(self) -> bool:
        """The operator asked for a semantics the drafter's own config does not use."""
        return self.requested is not None and self.requested != self.sliding

    def note(self) -> str | None:
        """What an operator must be told about this run's semantics, if anything."""
        if self.overridden:
            return (
                f"--sliding {self.requested} was not applied: the drafter's {self.source} "
                f"makes every layer {self.sliding} (the drafter's own config decides)"
            )
        if self.windowless_layers and not self.sliding_layers and self.source == "--sliding":
            return (
                f"--sliding {self.sliding} changes nothing: use_sliding_window is not true, so the "
                f"drafter's {self.windowless_layers} sliding_attention layer(s) attend as "
                "full_attention layers do"
            )
        return None

    def record(self) -> dict[str, Any]:
        """The ``attention`` object of eval_results.json."""
        out: dict[str, Any] = {
            "sliding": self.sliding,
            "full": self.full,
            "source": self.source,
            "sliding_layers": self.sliding_layers,
        }
        if self.requested is not None:
            out["requested"] = self.requested
        if self.windowless_layers:
            out["use_sliding_window"] = False
            out["windowless_layers"] = self.windowless_layers
        return out


def resolve_attention(
    config_causal: bool | None,
    config_key: str | None,
    requested: str | None,
    sliding_layers: int = 0,
) -> Attention:
    """Semantics of a run: the drafter config's own causality, else ``--sliding``, else the default.

    ``requested`` is None when the operator did not ask (the default applies).
    """
    if requested is not None and requested not in SEMANTICS:
        raise ValueError(f"sliding semantics must be one of {', '.join(SEMANTICS)}: {requested!r}")
    if config_causal is not None:
        mode = CAUSAL if config_causal else BIDIRECTIONAL
        return Attention(mode, mode, f"config.json {config_key}", sliding_layers, requested)
    if requested is not None:
        return Attention(requested, BIDIRECTIONAL, "--sliding", sliding_layers)
    return Attention(DEFAULT_SLIDING, BIDIRECTIONAL, "default", sliding_layers)


def config_causality(raw: dict[str, Any]) -> tuple[bool | None, str | None, list[str]]:
    """The drafter config's own causality: (value, the key it came from, problems).

    Read the way vLLM's DFlash resolver reads it: top-level ``is_causal`` first,
    then ``dflash_config.causal`` (``dflash_config.is_causal`` is accepted too).
    Keys that disagree, or that are not booleans, are problems: the run cannot
    know which one the drafter was trained with.
    """
    found_nested = raw.get("dflash_config")
    nested: dict[str, Any] = found_nested if isinstance(found_nested, dict) else {}
    found: list[tuple[str, Any]] = []
    for key, table, name in (
        ("is_causal", raw, "is_causal"),
        ("dflash_config.causal", nested, "causal"),
        ("dflash_config.is_causal", nested, "is_causal"),
    ):
        if table.get(name) is not None:
            found.append((key, table[name]))
    problems = [
        f"{k}: expected true or false, found {v!r}" for k, v in found if not isinstance(v, bool)
    ]
    good = [(k, v) for k, v in found if isinstance(v, bool)]
    if len({v for _, v in good}) > 1:
        shown = ", ".join(f"{k} = {str(v).lower()}" for k, v in good)
        problems.append(f"{shown}: the config disagrees with itself about causal attention")
    if problems or not good:
        return None, None, problems
    return good[0][1], good[0][0], []
