"""Each trainer's scalar names, as it writes them, mapped to the console's metrics."""

from __future__ import annotations

import pytest

from dflash_tui.monitor.trackers import Scalar, ScalarBatch
from dflash_tui.monitor.trackers.feed import TrackerFeed
from dflash_tui.monitor.trackers.names import Meaning, meaning

CASES = [
    # SpecForge (specforge/tracker.py logs its metric dicts as given)
    ("train/loss", Meaning("loss")),
    ("train/acc", Meaning("acc")),
    ("train/acc_3", Meaning("acc_position", 3)),
    ("train/ploss_1", Meaning("ploss_position", 1)),
    ("train/acceptance_rate_0", Meaning("accept_rate_position", 0)),
    ("eval/avg_loss", Meaning("eval_loss")),
    ("eval/avg_acc", Meaning("eval_acc")),
    ("eval/per_position_acc/2", Meaning("eval_acc_position", 2)),
    ("eval/ploss_2", Meaning("eval_ploss_position", 2)),
    ("eval/simulated_acc_len", Meaning("trainer_tau", rank=3)),
    # speculators (nested dicts flattened with "/")
    ("train/full_acc", Meaning("acc")),
    ("train/position_4_acc", Meaning("acc_position", 4)),
    ("train/eal", Meaning("trainer_tau", rank=6)),
    ("val/loss_epoch", Meaning("eval_loss")),
    ("val/position_0_acc_epoch", Meaning("eval_acc_position", 0)),
    # HF Trainer / Model-Optimizer, as logged and as HF's TensorBoard callback writes them
    ("loss", Meaning("loss")),
    ("train/learning_rate", Meaning("lr")),
    ("eval/loss", Meaning("eval_loss")),
    ("train/train_acc/parallel_0_step_1", Meaning("acc_position", 1)),
    ("train_acc/parallel_1_step_0", None),  # a parallel draft's, not the chain's
    ("estimated_training_ar", Meaning("trainer_tau", rank=8)),
    ("validate_ar", Meaning("trainer_tau", rank=0)),
    ("train/num_input_tokens_seen", Meaning("tokens")),  # include_num_input_tokens_seen
    ("train/grad_norm", None),
]


@pytest.mark.parametrize(("name", "expected"), CASES, ids=[c[0] for c in CASES])
def test_names(name: str, expected: Meaning | None) -> None:
    assert meaning(name) == expected


def test_the_best_estimate_wins_and_unknown_names_are_kept() -> None:
    feed = TrackerFeed("tensorboard", "runs")
    batch = ScalarBatch(
        (
            Scalar(10, "train/simulated_acc_len", 2.9),
            Scalar(10, "eval/simulated_acc_len", 2.4),
            Scalar(20, "train/simulated_acc_len", 3.1),
            Scalar(20, "train/grad_norm", 0.7),
        ),
        (),
        None,
        records=4,
    )
    feed.apply(batch, 0.0)
    assert feed.trainer_tau is not None
    assert (feed.trainer_tau.source, feed.trainer_tau.step) == ("eval/simulated_acc_len", 10)
    assert list(feed.series["train/grad_norm"]) == [(20, 0.7)]


def test_without_tensorboardx_the_run_says_what_to_install(monkeypatch) -> None:
    import sys

    from dflash_tui.core.config import RunConfig
    from dflash_tui.monitor.trackers.tfrecord import MissingExtra
    from dflash_tui.monitor.tracking import open_follower

    for name in ("tensorboardX", "tensorboardX.record_writer", "tensorboardX.proto"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it now fails
    cfg = RunConfig(name="r", host="h", log=None, tensorboard="out/runs")
    with pytest.raises(MissingExtra, match=r"pip install 'dflash-tui\[tensorboard\]'"):
        open_follower(None, cfg, None)  # type: ignore[arg-type]  # fails before any I/O
