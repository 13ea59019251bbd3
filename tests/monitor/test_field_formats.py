"""The field's trainers and servers, line by line (docs/monitoring.md "What is read from each trainer and server"; docs/monitoring.md "Served acceptance"): fast parser tests.

Each line is written exactly as the program in question prints it (see
tests/monitor/fieldlogs/make_fieldlogs.py for the sources read); the whole logs
are tailed on a real sshd in test_field_logs.py.
"""

from __future__ import annotations

import pytest

from dflash_tui.monitor.history import History, LazySeries
from dflash_tui.monitor.lines import clean_line
from dflash_tui.monitor.metrics import MetricParser, Metrics

STAMP = "12/02/2026 07:00:06 - INFO - specforge.utils - "
BAR = (
    "Training Epoch 2:  48%|████▊     | 19/40 [00:05<00:06,  3.23it/s, "
    "loss=2.2182, acc=0.5010, iter_time=0.31s]"
)


def parse(line: str) -> Metrics:
    m = MetricParser().parse(line)
    assert m is not None, line
    return m


# --------------------------------------------------------------------------- SpecForge


def test_specforge_dflash_step_line_over_its_bar_takes_the_step_lines_values() -> None:
    raw = f"\r{BAR}\r{BAR}{STAMP}Train - Step 100 [100/120?], Loss: 1.9555, Acc: 0.5523".encode()
    m = parse(clean_line(raw))
    assert (m.step, m.total, m.loss, m.acc, m.bar) == (100, 120, 1.9555, 0.5523, False)


def test_total_training_steps_is_a_total_not_a_step() -> None:
    m = parse(f"{STAMP}Total training steps: 52860")
    assert (m.step, m.total) == (None, 52860)
    m = parse("  Total optimization steps = 1,000")  # the HF Trainer's banner
    assert (m.step, m.total) == (None, 1000)


def test_a_bar_alone_gives_its_counter_as_a_bar_step_and_never_a_total() -> None:
    m = parse(BAR)
    assert (m.step, m.bar, m.total, m.loss, m.acc) == (19, True, None, 2.2182, 0.5010)
    assert (
        MetricParser().parse("Evaluating Epoch 0: 100%|██████████| 8/8 [00:01<00:00,  5.00it/s]")
        is None
    )
    rich_bar = "Epoch 0 100% ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 60/60  [ 0:00:00 < 0:00:00 , ? it/s ]"
    m = parse(rich_bar)  # tqdm.rich's, once per epoch: its epoch, no step
    assert (m.step, m.total, m.bar, m.epoch) == (None, None, False, 0)


def test_specforge_unified_trainer_dict_lines() -> None:
    m = parse(
        "step 60: {'train/acc_0': 0.669, 'train/acc_1': 0.519, 'train/acc_2': 0.369, "
        "'train/ploss_0': 2.67, 'train/acc': 0.519, 'train/loss': 2.6715, "
        "'train/acceptance_rate_0': 0.6, 'train/lr': 0.0001, "
        "'train/perf/optimizer_steps_per_hour': 7200.0}"
    )
    assert (m.step, m.loss, m.acc, m.lr) == (60, 2.6715, 0.519, 0.0001)
    assert m.acc_per_position == (0.669, 0.519, 0.369)
    plain = parse("step 5: {'acc_0': 0.7, 'acc_1': 0.5, 'acc': 0.6, 'loss': 2.5, 'lr': 2e-05}")
    assert (plain.step, plain.loss, plain.acc, plain.acc_per_position) == (5, 2.5, 0.6, (0.7, 0.5))


def test_eval_metrics_are_kept_apart_from_training_ones() -> None:
    m = parse(
        "step 60: {'eval/avg_loss': 2.77, 'eval/avg_acc': 0.649, "
        "'eval/per_position_acc/0': 0.649, 'eval/simulated_acc_len': 2.3}"
    )
    assert (m.step, m.loss, m.acc, m.acc_per_position) == (60, None, None, None)
    assert (m.eval_loss, m.eval_acc) == (2.77, 0.649)
    hf = parse("{'eval_loss': 2.31, 'eval_accuracy': 0.41, 'eval_runtime': 12.5, 'epoch': 1.0}")
    assert (hf.loss, hf.acc, hf.eval_loss, hf.eval_acc) == (None, None, 2.31, 0.41)
    nested = parse('{"step": 10, "train": {"loss": 2.0}, "eval": {"loss": 2.5, "acc": 0.4}}')
    assert (nested.loss, nested.eval_loss, nested.eval_acc, nested.acc) == (2.0, 2.5, 0.4, None)


def test_specforge_eagle3_position_lines_are_per_position_accuracies() -> None:
    m = parse(f"{STAMP}Eval - Step 10 [11/2], position 1,  Acc: 0.26")
    assert (m.step, m.acc, m.acc_position, m.total) == (10, None, (1, 0.26), None)
    rate = parse(f"{STAMP}Eval - Step 10 [11/2], position 0,  Acceptance Rate: 0.3696")
    assert (rate.acc, rate.acc_position) == (None, None)
    h = History()
    for i, a in enumerate((0.41, 0.26, 0.11)):
        h.add(parse(f"{STAMP}Eval - Step 10 [11/2], position {i},  Acc: {a:.2f}"))
    assert h.acc_per_position == (0.41, 0.26, 0.11) and h.acc_per_position_step == 10
    h.add(parse(f"{STAMP}Eval - Step 20 [21/2], position 0,  Acc: 0.50"))
    assert h.acc_per_position == (0.41, 0.26, 0.11)  # step 20 is still being gathered


# --------------------------------------------------------------------------- speculators

SPECULATORS = (
    "train/loss=2.799, train/full_acc=0.584, train/position_1_acc=0.704, "
    "train/position_2_acc=0.584, train/position_3_acc=0.464, train/eal=1.190, "
    "profile/fetch_ms=12.500, profile/tokens_per_s=4.17e+04, profile/fetch_frac=0.032, "
    "epoch=0, lr=2.00e-04, global_step=55"
)


def test_speculators_one_line_record() -> None:
    m = parse(f"[07:00:22] INFO     {SPECULATORS}            trainer.py:498")
    assert (m.step, m.loss, m.acc, m.tok_s, m.lr, m.epoch) == (55, 2.799, 0.584, 41700.0, 2e-4, 0)
    assert m.acc_per_position == (0.704, 0.584, 0.464)


def test_speculators_record_wrapped_by_rich_joins_on_its_step_line() -> None:
    lines = [
        "[07:00:22] INFO     train/loss=2.799, train/full_acc=0.584,       trainer.py:498",
        "                    train/position_1_acc=0.704,                                 ",
        "                    train/position_2_acc=0.584,                                 ",
        "                    train/position_3_acc=0.464, train/eal=1.190,                ",
        "                    profile/tokens_per_s=4.17e+04,                              ",
        "                    profile/fetch_frac=0.032, epoch=0,                          ",
        "                    lr=2.00e-04, global_step=55                                 ",
    ]
    parser = MetricParser()
    got = [parser.parse(line) for line in lines]
    last = got[-1]
    assert last is not None and last.step == 55
    assert (last.loss, last.acc, last.tok_s, last.lr) == (2.799, 0.584, 41700.0, 2e-4)
    assert last.acc_per_position == (0.704, 0.584, 0.464)
    # an unindented line starts a new record: nothing is carried into it
    fresh = parser.parse("[07:00:24] INFO     lr=1.00e-04, global_step=60     trainer.py:498")
    assert fresh is not None and (fresh.step, fresh.loss) == (60, None)


def test_speculators_eagle3_per_step_accuracies_are_per_position() -> None:
    m = parse(
        "[07:00:22] INFO     train/loss_0=2.100, train/full_acc_0=0.700, train/cond_acc_0=0.700, "
        "train/loss_1=2.400, train/full_acc_1=0.500, train/cond_acc_1=0.714, "
        "train/loss_2=2.700, train/full_acc_2=0.300, train/cond_acc_2=0.600, "
        "profile/tokens_per_s=3.90e+04, epoch=1, lr=1.00e-04, global_step=300"
    )
    assert (m.step, m.acc, m.loss, m.tok_s) == (300, None, None, 39000.0)
    assert m.acc_per_position == (0.7, 0.5, 0.3)


def test_speculators_validation_record_is_eval() -> None:
    m = parse("[07:00:24] INFO     val/loss_epoch=1.900, val/full_acc_epoch=0.333, epoch=0")
    assert (m.loss, m.acc, m.eval_loss, m.eval_acc) == (None, None, 1.9, 0.333)


# --------------------------------------------------------------------------- servers

VLLM = (
    "(APIServer pid=4321) INFO 12-02 07:02:30 [metrics.py:96] SpecDecoding metrics: "
    "Mean acceptance length: 1.98, Accepted throughput: 24.50 tokens/s, "
    "Drafted throughput: 105.60 tokens/s, Accepted: 245 tokens, Drafted: 1056 tokens, "
    "Per-position acceptance rate: 0.392, 0.319, 0.245, 0.172, Avg Draft acceptance rate: 23.2%"
)


@pytest.mark.parametrize(
    ("line", "length", "positions", "tok_s"),
    [
        (VLLM, 1.98, (0.392, 0.319, 0.245, 0.172), None),
        (  # vLLM 0.8.x: rate first, then the length
            "INFO 05-06 10:11:12 [metrics.py:87] SpecDecoding metrics: Draft acceptance rate: 60.5%, "
            "Mean acceptance length: 3.42, Accepted: 605 tokens, Drafted: 1000 tokens, "
            "Per-position acceptance rate: 0.968, 0.786, 0.605, 0.424",
            3.42,
            (0.968, 0.786, 0.605, 0.424),
            None,
        ),
        (  # vLLM V0: efficiency x (k + 1) emitted per step
            "INFO 10-16 19:05:47 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.642, "
            "System efficiency: 0.598, Number of speculative tokens: 3, Number of accepted tokens: "
            "8547, Number of draft tokens: 13311, Number of emitted tokens: 10616.",
            0.598 * 4,
            None,
            None,
        ),
        (
            "[2026-12-02 07:00:56] Decode batch, #running-req: 4, #token: 1754, token usage: 0.01, "
            "accept len: 3.12, accept rate: 0.78, cuda graph: True, gen throughput (token/s): "
            "263.00, #queue-req: 0, ",
            3.12,
            None,
            263.0,
        ),
        (  # an older SGLang
            "[2025-03-01 12:00:00 TP0] Decode batch. #running-req: 1, #token: 183, token usage: "
            "0.00, accept len: 3.10, gen throughput (token/s): 92.36, #queue-req: 0",
            3.10,
            None,
            92.36,
        ),
    ],
)
def test_served_acceptance_reports(
    line: str, length: float, positions: tuple[float, ...] | None, tok_s: float | None
) -> None:
    m = parse(line)
    assert m.accept_len == pytest.approx(length)
    assert (m.accept_per_position, m.tok_s, m.step, m.acc) == (positions, tok_s, None, None)


def test_vllm_throughput_line_gives_the_generation_rate_not_the_prompt_rate() -> None:
    m = parse(
        "(APIServer pid=4321) INFO 12-02 07:00:10 [loggers.py:123] Engine 000: Avg prompt "
        "throughput: 512.3 tokens/s, Avg generation throughput: 180.0 tokens/s, Running: 8 reqs, "
        "Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: 42.0%"
    )
    assert (m.tok_s, m.accept_len) == (180.0, None)


def test_vllm_rates_only_report_has_no_length_to_read() -> None:
    m = MetricParser().parse(
        "INFO 03-20 10:00:00 [loggers.py:87] SpecDecoding metrics: Draft acceptance rate: 60.5%, "
        "Accepted: 605 tokens, Drafted: 1000 tokens"
    )
    assert m is None or (m.accept_len is None and m.acc is None)


# --------------------------------------------------------------------------- the history


def test_a_bar_never_overrides_the_logs_own_step_nor_becomes_the_total() -> None:
    h = History()
    h.add(parse(f"{STAMP}Total training steps: 120"))
    h.add(parse(f"{STAMP}Train - Step 100 [100/120?], Loss: 1.9555, Acc: 0.5523"))
    h.add(parse(BAR))  # epoch 2's bar at 19/40, after the log's step 100
    assert (h.last_step, h.total, len(h)) == (100, 120, 1)
    assert (h.trend("loss").last, h.trend("acc").last) == (1.9555, 0.5523)


def test_a_bar_keeps_counting_past_a_mere_mention_of_a_step() -> None:
    h = History()
    h.add(parse(BAR))
    h.add(parse("Saving checkpoint at step 5000."))  # no values: not the log's own step line
    h.add(parse(BAR.replace("19/40", "20/40").replace("loss=2.2182", "loss=2.2100")))
    assert [(p.step, p.loss) for p in h.points()] == [(19, 2.2182), (20, 2.21)]


def test_served_acceptance_trend_and_drop() -> None:
    h = History()
    for length in [3.5, 3.4, 3.6] * 5:
        h.add(Metrics(accept_len=length, accept_per_position=(0.9, 0.7)))
    view = h.served.view()
    assert view is not None and not view.dropped and view.level == pytest.approx(3.5)
    assert view.last == 3.6 and 3.4 < view.ema < 3.6 and view.per_position == (0.9, 0.7)
    for length in (2.2, 2.1, 2.0):
        h.add(Metrics(accept_len=length))
    view = h.served.view()
    assert view is not None and view.dropped and view.slope_per_100_reports < 0
    lazy = LazySeries(h)  # what a RunView carries: read without building the columns
    assert lazy.served and len(lazy) == 18 and lazy.last_value("accept_len") == 2.0
    series = h.series()
    assert series.served and series.accept_len[-1] == 2.0 and series.steps[-1] == 18
