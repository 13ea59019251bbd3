"""A deterministic session for UI tests: real view dataclasses with fixed values, a frozen
clock, and no network. It implements the same interface as ConsoleSession
(`dflash_tui.console.session.SessionAPI`); tests change its views and emit the same
events the real session emits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dflash_tui.console.events import JobsChanged, LeaderboardChanged
from dflash_tui.console.transfers import TransferView
from dflash_tui.core.config import Config
from dflash_tui.core.config_parse import parse_config
from dflash_tui.evals.jobs.job import Job
from dflash_tui.evals.results.leaderboard import Leaderboard, Row, legend
from dflash_tui.evals.results.progress import MetricSeries, Point, RunProgress
from dflash_tui.evals.results.served.board import ServedSection
from dflash_tui.evals.results.served.record import ServedEntry
from dflash_tui.evals.results.served.store import ServedResult
from dflash_tui.monitor.gpu import GpuInfo, GpuProcess
from dflash_tui.monitor.history import HistorySeries, Trend
from dflash_tui.monitor.liveness import ProcessInfo, RunState
from dflash_tui.monitor.tau import estimate_tau
from dflash_tui.monitor.views import HostView, LinesAppended, LogLine, RunUpdated, RunView

NOW = 1_750_000_000.0  # frozen clock: 2025-06-15 15:06:40 UTC

CONFIG_TEXT = """
[console]
results_dir = "results"
state_dir = "state"
known_hosts = "known_hosts"
refresh_s = 2.0

[hosts.trainbox]
address = "127.0.0.1"
port = 2221
exec_prefix = ["pct", "exec", "200", "--"]
roles = ["train"]

[hosts.evalbox]
address = "127.0.0.1"
port = 2222
roles = ["eval"]

[hosts.storage]
address = "127.0.0.1"
port = 2223
roles = ["storage"]

[[runs]]
name = "slammed5"
host = "trainbox"
log = "workspace/train_slammed5.log"
process = "train_dflash_pipeline.py --run slammed5"
total_steps = 70000

[[runs]]
name = "wide-lr"
host = "trainbox"
log = "workspace/train_wide-lr.log"
process = "train_dflash_pipeline.py --run wide-lr"
total_steps = 70000
stall_after_s = 60

[[runs]]
name = "ablate-ctx"
host = "trainbox"
log = "workspace/train_ablate-ctx.log"
process = "train_dflash_pipeline.py --run ablate-ctx"
total_steps = 70000
"""


def fixture_config(extra: str = "", console: str = "") -> Config:
    """The fixture's config; `console` adds lines to [console], `extra` tables at the end."""
    text = CONFIG_TEXT.replace("refresh_s = 2.0\n", "refresh_s = 2.0\n" + console)
    return parse_config(text + extra, Path("hosts.toml"))


def _series(last_step: int, seed: int) -> HistorySeries:
    """A run's columns: 3.2 steps a second until its last step (at NOW - seed minutes)."""
    steps = tuple(range(10, last_step + 1, 10))
    loss, loss_ema, acc, acc_ema, tok = [], [], [], [], []
    le = ae = None
    for i, s in enumerate(steps):
        wobble = math.sin(i * 0.7 + seed) * 0.02
        lv = 0.55 + 1.05 * math.exp(-s / 9000.0) + wobble
        av = 0.15 + 0.5 * (1 - math.exp(-s / 12000.0)) + wobble / 3
        le = lv if le is None else le + (lv - le) * 0.1
        ae = av if ae is None else ae + (av - ae) * 0.1
        loss.append(lv)
        loss_ema.append(le)
        acc.append(av)
        acc_ema.append(ae)
        tok.append(41000.0 + 800 * math.sin(i * 0.3 + seed))
    return HistorySeries(
        steps=steps,
        loss=tuple(loss),
        loss_ema=tuple(loss_ema),
        acc=tuple(acc),
        acc_ema=tuple(acc_ema),
        tok_s=tuple(tok),
        lr=tuple(3e-4 for _ in steps),
        time=tuple(NOW - seed * 60 - (last_step - s) / 3.2 for s in steps),
    )


def _lines(run: str, last_step: int, count: int = 40) -> tuple[LogLine, ...]:
    out = []
    first = max(10, last_step - 10 * (count - 1))
    for i, step in enumerate(range(first, last_step + 1, 10), start=1):
        out.append(
            LogLine(
                i,
                f"[2025-06-15 15:0{i % 10}:00] step {step}/70000 | loss {0.6 + i / 1000:.4f} | "
                f"acc {0.44 + i / 10000:.4f} | lr 2.99e-04 | 41.2 Ktok/s | epoch 0.06",
            )
        )
    return tuple(out)


def run_view(
    name: str,
    state: RunState,
    reason: str,
    *,
    step: int,
    seed: int,
    log_changed_at: float,
    processes: tuple[ProcessInfo, ...] = (),
    per_position: tuple[float, ...] | None = None,
    seq: int = 1,
) -> RunView:
    series = _series(step, seed)
    position_steps = tuple(
        (s, tuple(round(v * (0.55 + 0.45 * s / step), 4) for v in per_position or ()))
        for s in range(500, step + 1, 500)
    )
    lines = _lines(name, step)
    acc_last = series.acc[-1]
    return RunView(
        name=name,
        host="trainbox",
        log=f"workspace/train_{name}.log",
        process_pattern=f"train_dflash_pipeline.py --run {name}",
        seq=seq,
        taken_at=NOW,
        state=state,
        state_reason=reason,
        state_since=NOW - 600,
        step=step,
        total_steps=70000,
        progress=step / 70000,
        loss=Trend(series.loss[-1], series.loss_ema[-1], -0.0123, len(series)),
        acc=Trend(acc_last, series.acc_ema[-1], 0.0052, len(series)),
        tokens_per_s=series.tok_s[-1],
        lr=2.99e-4,
        epoch=step / 52000,
        steps_per_s=3.2 if state == RunState.ALIVE else None,
        eta_s=(70000 - step) / 3.2 if state == RunState.ALIVE else None,
        acc_per_position=per_position,
        acc_per_position_step=step - step % 500 if per_position else None,
        tau=estimate_tau(acc=series.acc_ema[-1], acc_per_position=per_position),
        log_changed_at=log_changed_at,
        log_size_bytes=212_345,
        last_line_at=log_changed_at,
        processes=processes,
        lines=lines,
        last_seq=lines[-1].seq,
        series=series,
        tail_status="following",
        tail_error=None,
        lines_seen=len(lines) + 300,
        lines_parsed=len(lines) + 294,
        lines_unparsed=6,
        history_points=len(series),
        history_step_lines=len(series),
        restarts=0,
        host_reachable=True,
        stall_after_s=60.0 if name == "wide-lr" else 300.0,
        # where it has per-position accuracies: one set every 500 steps, rising to them
        acc_per_position_steps=position_steps if per_position else (),
    )


def default_runs() -> dict[str, RunView]:
    per_position = tuple(round(min(0.99, 0.45 * 1.6 * 0.86**k), 4) for k in range(15))
    proc = ProcessInfo(
        4242, 3725, "python3 workspace/train_dflash_pipeline.py --run slammed5 --seed 5", 4242
    )
    stalled = ProcessInfo(
        4243, 3725, "python3 workspace/train_dflash_pipeline.py --run wide-lr", 4243
    )
    return {
        "slammed5": run_view(
            "slammed5",
            RunState.ALIVE,
            "process up, log updated 1s ago",
            step=3120,
            seed=5,
            log_changed_at=NOW - 1,
            processes=(proc,),
            per_position=per_position,
        ),
        "wide-lr": run_view(
            "wide-lr",
            RunState.STALLED,
            "process up but the log has not changed for 15m00s",
            step=3000,
            seed=7,
            log_changed_at=NOW - 900,
            processes=(stalled,),
        ),
        "ablate-ctx": run_view(
            "ablate-ctx",
            RunState.DEAD,
            "no process matches; last line: torch.OutOfMemoryError: CUDA out of memory",
            step=3000,
            seed=11,
            log_changed_at=NOW - 1800,
        ),
    }


def default_hosts() -> dict[str, HostView]:
    def owners(i: int) -> tuple[GpuProcess, ...]:
        # slammed5 holds GPUs 0-5 (its workers, in its session), wide-lr 6; 7 sits idle.
        if i < 6:
            return (GpuProcess(4300 + i, 70512.0 + i * 131, 4242, "python3 -u train.py"),)
        return (GpuProcess(4243, 69000.0, 4243, "python3 train.py"),) if i == 6 else ()

    gpus = tuple(
        GpuInfo(
            i,
            "NVIDIA H100 80GB HBM3",
            88.0 + (i * 7) % 11 if i < 7 else 0.0,
            71000.0 + i * 131 if i < 7 else 4.0,
            81559.0,
            uuid=f"GPU-8d3f2b1c-41a7-5e09-b2c4-7f1e0a9d6c3{i}",
            temp_c=59.0 + i % 4 if i < 7 else 34.0,
            power_w=612.45 + i * 7 if i < 7 else 69.85,
            power_limit_w=700.0,
            throttle=0x4 if i == 3 else 0x1 if i == 7 else 0,
            processes=owners(i),
        )
        for i in range(8)
    )
    eval_gpu = GpuInfo(
        0,
        "NVIDIA H100 80GB HBM3",
        64.0,
        18211.0,
        81559.0,
        uuid="GPU-1c9e7a52-0b3d-4f86-a1e2-93d5c7b40f18",
        temp_c=51.0,
        power_w=388.1,
        power_limit_w=700.0,
        throttle=0,
        processes=(GpuProcess(7002, 18020.0, 7001, "python3 -m harness"),),
    )

    def host(name: str, port: int, gpu: tuple[GpuInfo, ...], runs: tuple[str, ...]) -> HostView:
        return HostView(
            name=name,
            address=f"127.0.0.1:{port}",
            via=None,
            seq=1,
            taken_at=NOW,
            reachable=True,
            error=None,
            latency_ms=1.2,
            probed_at=NOW - 1,
            gpus=gpu,
            gpu_error=None,
            has_nvidia_smi=bool(gpu),
            clock_offset_s=0.0,
            runs=runs,
        )

    return {
        "trainbox": host("trainbox", 2221, gpus, ("slammed5", "wide-lr", "ablate-ctx")),
        "evalbox": host("evalbox", 2222, (eval_gpu,), ()),
        "storage": host("storage", 2223, (), ()),
    }


def default_jobs() -> tuple[Job, ...]:
    return (
        Job(
            id="20250615-150440-ab12",
            backend="ssh",
            host="evalbox",
            suite="coding10",
            checkpoint="slammed5/step-3000",
            checkpoint_host="trainbox",
            checkpoint_path="workspace/checkpoints/slammed5/step-3000",
            state="running",
            created_at=NOW - 120,
            updated_at=NOW - 5,
            run="slammed5",
            step=3000,
            progress_done=120,
            progress_total=300,
            started_at=NOW - 100,
            pid=7001,
        ),
        Job(
            id="20250615-140000-cd34",
            backend="ssh",
            host="evalbox",
            suite="coding10",
            checkpoint="slammed5/step-2000",
            checkpoint_host="trainbox",
            checkpoint_path="workspace/checkpoints/slammed5/step-2000",
            state="done",
            created_at=NOW - 4000,
            updated_at=NOW - 3400,
            run="slammed5",
            step=2000,
            started_at=NOW - 3900,
            finished_at=NOW - 3400,
            collected_at=NOW - 3390,
        ),
    )


def default_board(baseline: str = "zlab") -> Leaderboard:
    def metrics(greedy: float, tau: float, acc: float, s1: float, s4: float) -> dict[str, float]:
        return {
            "tau_greedy": greedy,
            "tau_top1": tau,
            "acc": acc,
            "streak_top1": s1,
            "streak_top4": s4,
        }

    zlab = metrics(3.12, 4.20, 0.46, 3.20, 6.10)
    rows = [
        ("zlab", zlab, None, None, NOW - 86400),
        ("slammed5/step-2000", metrics(2.31, 3.11, 0.38, 2.11, 4.90), "slammed5", 2000, NOW - 3400),
        ("slammed5/step-1000", metrics(1.95, 2.48, 0.31, 1.48, 3.70), "slammed5", 1000, NOW - 7200),
    ]
    base = dict(next(r[1] for r in rows if r[0] == baseline))
    out = [
        Row(
            name,
            m,
            {k: v / base[k] for k, v in m.items()},
            baseline=name == baseline,
            step=step,
            run=run,
            created_at=when,
        )
        for name, m, run, step, when in rows
    ]
    out.append(Row("slammed5/step-3000", {}, {}, step=3000, run="slammed5"))
    return Leaderboard(
        suite="coding10",
        baseline=baseline,
        baseline_source="config" if baseline == "zlab" else "override",
        sort="tau_greedy",
        columns=("tau_greedy", "tau_top1", "acc", "streak_top1", "streak_top4"),
        rows=tuple(out),
        tasks={
            "json_parser": tuple(dataclasses.replace(r, n_anchors=120) for r in out if r.metrics),
        },
        legend=legend(["target_greedy"], True),
        legend_brief=legend(["target_greedy"], True, brief=True),
        greedy_labels=("target_greedy",),
    )


def default_served(suite: str = "coding10") -> ServedSection:
    """Served rows as `evals.results.served.board` lays them out: by task, in the board's order."""

    def row(checkpoint: str, fmt: str, entry: ServedEntry) -> ServedResult:
        return ServedResult(
            checkpoint, None, fmt, entry, f"/runs/{fmt}.out", "ab" * 32, NOW - 600, "served/-/x"
        )

    ddtree = {"temperature": 0.0, "block_size": 16}
    return ServedSection(
        suite,
        (
            row(
                "zlab",
                "zlab",
                ServedEntry("gsm8k", "dflash", 6.54, 201.5, 4.47, 45.12, {"block_size": 16}),
            ),
            row(
                "slammed5/step-2000",
                "ddtree",
                ServedEntry("gsm8k", "dflash", 4.12, 150.3, 3.05, 49.3, ddtree),
            ),
            row(
                "slammed5/step-2000",
                "ddtree",
                ServedEntry(
                    "gsm8k", "ddtree tb64", 5.38, 171.0, 3.47, 49.3, {**ddtree, "tree_budget": 64}
                ),
            ),
            row(
                "zlab",
                "zlab",
                ServedEntry(
                    "humaneval",
                    "sglang",
                    5.32,
                    1379.1,
                    None,
                    None,
                    {"backend": "sglang", "concurrency": 1},
                ),
            ),
        ),
    )


def default_progress(run: str, board: Leaderboard, extra: tuple[Row, ...] = ()) -> RunProgress:
    """The run's progress as `evals.progress` builds it, from the fixture's leaderboard."""
    rows = [r for r in (*board.rows, *extra) if r.run == run and r.metrics and r.step]
    base = next((r.metrics for r in board.rows if r.baseline), {})
    series = {
        m: MetricSeries(
            m,
            tuple(
                sorted(
                    (
                        Point(r.step or 0, r.metrics[m], r.checkpoint, r.created_at or NOW)
                        for r in rows
                        if m in r.metrics
                    ),
                    key=lambda p: p.step,
                )
            ),
            base.get(m),
        )
        for m in board.columns
        if any(m in r.metrics for r in rows)
    }
    note = None if rows else f"no results of run {run} on {board.suite} yet"
    return RunProgress(run, board.suite, board.baseline, series, note)


class FixtureSession:
    """Fixed snapshots; `set_run` / `append_lines` change them and emit the events."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or fixture_config()
        self.clock_value = NOW
        self._runs = default_runs()
        self._hosts = default_hosts()
        self._transfers: tuple[TransferView, ...] = ()
        self._subscribers: list[Callable[[Any], None]] = []
        self.started = False
        self.stopped = False
        self.refreshes = 0
        self.relays: list[tuple[str, str]] = []
        self.line_reads = 0
        self.watched: list[str | None] = []  # watch_lines calls, in order
        self.transfer_reads = 0
        self.board_reads = 0
        self._jobs = default_jobs()
        self._baseline = "zlab"
        self.evals_started: list[tuple[str, str]] = []
        self.benches_started: list[tuple[str, str]] = []
        self.cancelled: list[str] = []
        self.progress_reads: list[tuple[str, str | None]] = []
        self.extra_results: tuple[Row, ...] = ()  # results added by a test (add_result)
        self.waiting: dict[str, frozenset[str]] = {}  # what the auto-eval queues next
        self.served_sections: tuple[ServedSection, ...] = ()  # served rows (default_served)
        self.evals_error: str | None = None
        self.notify_error: str | None = None

    # ---- SessionAPI
    def now(self) -> float:
        return self.clock_value

    def stores(self) -> tuple[Any, ...]:
        return ()  # no [stores.NAME] in the fixture config

    def last_refresh_at(self) -> float | None:
        return NOW - 1

    def subscribe(self, callback: Callable[[Any], None]) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    async def start(self) -> None:
        self.started = True

    async def stop(self, timeout_s: float = 8.0) -> bool:
        self.stopped = True
        return True

    def refresh_now(self) -> None:
        self.refreshes += 1

    def run_names(self) -> tuple[str, ...]:
        return tuple(self._runs)

    def run(self, name: str) -> RunView:
        return self._runs[name]

    def runs(self) -> tuple[RunView, ...]:
        return tuple(self._runs.values())

    def hosts(self) -> tuple[HostView, ...]:
        return tuple(self._hosts.values())

    def lines(self, run: str, after_seq: int = 0) -> tuple[LogLine, ...]:
        self.line_reads += 1
        return self._runs[run].lines_after(after_seq)

    def watch_lines(self, run: str | None) -> None:
        self.watched.append(run)

    def transfers(self) -> tuple[TransferView, ...]:
        self.transfer_reads += 1
        return self._transfers

    async def relay(self, src: str, dst: str) -> str:
        self.relays.append((src, dst))
        return "t-fixture"

    async def complete_path(self, host: str | None, prefix: str) -> list[str]:
        names = ["models/", "models.txt"] if host else ["local/"]
        return [n for n in names if n.startswith(prefix)]

    @property
    def evals_available(self) -> bool:
        return True

    def jobs(self) -> tuple[Job, ...]:
        return self._jobs

    def leaderboards(self) -> tuple[Leaderboard, ...]:
        self.board_reads += 1
        return (default_board(self._baseline),)

    def leaderboard(self, suite: str, *, tasks: bool = False) -> Leaderboard | None:
        return default_board(self._baseline)

    def served(self, boards: Any) -> dict[str, Any]:
        return {s.suite: s for s in self.served_sections}

    async def start_eval(self, checkpoint: Any, suite: str) -> Job:
        name = checkpoint if isinstance(checkpoint, str) else checkpoint.name
        self.evals_started.append((name, suite))
        return dataclasses.replace(self._jobs[0], id="20250615-150640-ef56", checkpoint=name)

    async def start_bench(self, checkpoint: Any, suite: str) -> Job:
        name = checkpoint if isinstance(checkpoint, str) else checkpoint.name
        self.benches_started.append((name, suite))
        return dataclasses.replace(
            self._jobs[0], id="20250615-150650-aa11", checkpoint=name, kind="bench"
        )

    async def cancel_job(self, job_id: str) -> Job:
        self.cancelled.append(job_id)
        return dataclasses.replace(self._jobs[0], state="cancelled")

    def set_baseline(self, suite: str, checkpoint: str | None) -> None:
        self._baseline = checkpoint or "zlab"
        self.emit(LeaderboardChanged())

    def progress(self, run: str, suite: str | None = None) -> RunProgress | None:
        self.progress_reads.append((run, suite))
        return default_progress(run, default_board(self._baseline), self.extra_results)

    def auto_eval_waiting(self, suite: str) -> frozenset[str]:
        return self.waiting.get(suite, frozenset())

    # ---- test helpers
    def emit(self, event: Any) -> None:
        for callback in list(self._subscribers):
            callback(event)

    def set_run(self, name: str, **changes: Any) -> RunView:
        view = self._runs[name]
        view = dataclasses.replace(view, seq=view.seq + 1, **changes)
        self._runs[name] = view
        self.emit(RunUpdated(name, view.seq))
        return view

    def append_lines(self, name: str, texts: list[str]) -> None:
        view = self._runs[name]
        seq = view.last_seq
        new = tuple(LogLine(seq + i, t) for i, t in enumerate(texts, start=1))
        lines = (view.lines + new)[-1000:]
        self._runs[name] = dataclasses.replace(
            view, lines=lines, last_seq=lines[-1].seq, seq=view.seq + 1
        )
        self.emit(LinesAppended(name, seq + 1, lines[-1].seq))
        self.emit(RunUpdated(name, view.seq + 1))

    def add_result(self, checkpoint: str, run: str, step: int, **metrics: float) -> None:
        """A result arrived (as the session's collect would store it)."""
        row = Row(checkpoint, metrics, {}, step=step, run=run, created_at=self.clock_value)
        self.extra_results = (*self.extra_results, row)
        self.emit(LeaderboardChanged())

    def emit_jobs_changed(self) -> None:
        self.emit(JobsChanged())

    def set_transfers(self, transfers: tuple[TransferView, ...]) -> None:
        self._transfers = transfers
