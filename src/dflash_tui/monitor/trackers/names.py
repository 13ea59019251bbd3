"""Scalar names as each trainer writes them, mapped to the console's metrics.

The names (docs/monitoring.md "Trackers" lists them with their writers):

- SpecForge (`specforge/tracker.py`): `train/loss`, `train/acc` (`train/avg_acc`),
  `train/lr`, `train/acc_K`, `train/ploss_K`, `train/acceptance_rate_K`,
  `eval/avg_loss`, `eval/avg_acc`, `eval/simulated_acc_len`,
  `eval/per_position_acc/K`, `eval/ploss_K`, `eval/acceptance_rate_K`.
- speculators (`src/speculators/train/logger.py` flattens nested dicts with `/`):
  `train/loss`, `train/full_acc`, `train/position_K_acc`, `train/eal`, `train/lr`,
  and the validation pass's `val/..._epoch` forms.
- HF Trainer / Model-Optimizer: `loss`, `learning_rate`, `epoch`, `eval_loss`,
  `train_acc/parallel_0_step_K`, `estimated_training_ar`, `validate_ar`. HF's
  TensorBoard callback writes them as `train/...` and `eval/...`; both forms match.

Every other scalar is kept under its own name (`Monitor.scalar_series`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Meaning:
    """What a scalar is to the console.

    `metric`: loss, acc, lr, epoch, tokens, eval_loss, eval_acc (a run's plotted metrics);
    acc_position, eval_acc_position, ploss_position, accept_rate_position (with
    `position`); trainer_tau (the trainer's own acceptance-length estimate, with
    `rank`: lower wins when a run logs several).
    """

    metric: str
    position: int | None = None
    rank: int = 0


_EXACT: dict[str, str] = {}
for _metric, _names in {
    "loss": ("train/loss", "loss", "train_loss", "train/train_loss"),
    "acc": ("train/acc", "train/avg_acc", "train/full_acc", "acc", "accuracy", "train_acc"),
    "lr": ("train/lr", "lr", "learning_rate", "train/learning_rate"),
    "epoch": ("epoch", "train/epoch"),
    # tokens seen so far (HF Trainer with include_num_input_tokens_seen): the plots' axis
    "tokens": (
        "num_input_tokens_seen",
        "train/num_input_tokens_seen",
        "tokens_seen",
        "train/tokens_seen",
        "consumed_tokens",
        "train/consumed_tokens",
    ),
    "eval_loss": ("eval/avg_loss", "eval/loss", "eval_loss", "val/loss", "val/loss_epoch"),
    "eval_acc": ("eval/avg_acc", "eval/acc", "eval_acc", "val/full_acc", "val/full_acc_epoch"),
}.items():
    for _name in _names:
        _EXACT[_name] = _metric

TRAINER_TAU_NAMES = (
    # measured by decoding (Model-Optimizer's AR validation): the closest to a real tau
    "validate_ar",
    "train/validate_ar",
    "eval/validate_ar",
    # from held-out per-position accuracy
    "eval/simulated_acc_len",
    "val/eal_epoch",
    "val/eal",
    # from training batches
    "train/eal",
    "train/simulated_acc_len",
    "estimated_training_ar",
    "train/estimated_training_ar",
)
"""Names of the trainer's acceptance-length estimates, best first."""

_POSITIONS = (
    (re.compile(r"^train/acc_(\d+)$"), "acc_position"),
    (re.compile(r"^train/position_(\d+)_acc$"), "acc_position"),
    (re.compile(r"^(?:train/)?train_acc/parallel_0_step_(\d+)$"), "acc_position"),
    (re.compile(r"^eval/per_position_acc[/_](\d+)$"), "eval_acc_position"),
    (re.compile(r"^val/position_(\d+)_acc(?:_epoch)?$"), "eval_acc_position"),
    (re.compile(r"^(?:train|eval)/ploss_(\d+)$"), "ploss_position"),
    (re.compile(r"^(?:train|eval)/acceptance_rate_(\d+)$"), "accept_rate_position"),
)


@lru_cache(maxsize=4096)
def meaning(name: str) -> Meaning | None:
    """The console metric `name` stands for, or None (kept under its own name only)."""
    metric = _EXACT.get(name)
    if metric is not None:
        return Meaning(metric)
    if name in TRAINER_TAU_NAMES:
        return Meaning("trainer_tau", rank=TRAINER_TAU_NAMES.index(name))
    for pattern, kind in _POSITIONS:
        match = pattern.match(name)
        if match:
            if (
                kind.endswith("_position")
                and name.startswith("eval/")
                and kind != "eval_acc_position"
            ):
                kind = "eval_" + kind
            return Meaning(kind, position=int(match.group(1)))
    return None
