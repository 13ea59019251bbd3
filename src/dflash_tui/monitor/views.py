"""Immutable snapshots of what the monitor knows, and the small events that say what changed.

A UI (or the CLI) never reads the monitor's mutable state: it gets a
`RunView` / `HostView` (frozen dataclasses holding tuples), built when
something changed and shared until the next change. Events name what
changed and carry no bulk data, so a UI that coalesces them (Textual's
`can_replace`) loses nothing: it pulls the current view when it repaints.

Ages tick without new snapshots: a view holds absolute times on the
monitor's clock (`log_changed_at`, `taken_at`); `age_s(now)` gives the age
at any later moment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dflash_tui.monitor.gpu import GpuInfo, summarize
from dflash_tui.monitor.history import HistorySeries, Trend
from dflash_tui.monitor.liveness import ProcessInfo, RunState
from dflash_tui.monitor.served import Acceptance
from dflash_tui.monitor.served_metrics import EndpointStatus
from dflash_tui.monitor.tail import TailNotice
from dflash_tui.monitor.tau import TauEstimate


@dataclass(frozen=True)
class LogLine:
    """A line of a run's log as shown in the log pane: `seq` counts lines per run from 1."""

    seq: int
    text: str


@dataclass(frozen=True)
class TrackerView:
    """A run's tracker as read so far (docs/monitoring.md "Trackers").

    `records` and `scalars` count what was read, each once (records cut by a drop
    are read again whole, and counted once); `corrupt` the records skipped for a
    bad CRC or a partial end; `names` every scalar name seen (plot any by name with
    `Monitor.scalar_series`).
    """

    kind: str
    path: str
    status: str
    error: str | None
    records: int
    scalars: int
    corrupt: int
    names: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "status": self.status,
            "error": self.error,
            "records": self.records,
            "scalars": self.scalars,
            "corrupt": self.corrupt,
            "names": list(self.names),
        }


PositionSteps = tuple[tuple[int | None, tuple[float, ...]], ...]
"""(step, values by position) for the last few steps, oldest first."""


@dataclass(frozen=True)
class RunView:
    """Everything the runs table, plots and log pane show about one run, at `taken_at`.

    Times are on the monitor's clock (seconds since the epoch unless a test
    froze it). None means "not known yet". `lines` is the recent-lines ring
    (oldest first, `lines[-1].seq == last_seq`); `series` the plot columns
    (refreshed at most once a second; the scalar fields are always current).
    `tail_status` is one of `loading`, `following`, `reconnecting`,
    `missing`, `stopped`; `notices` the last tail events (reconnected,
    rotated, truncated, ...), oldest first. `acceptance` is what a server
    reports (docs/monitoring.md "Served acceptance"; None for a trainer's log): from its /metrics while
    that answers (`acceptance.source == "metrics"`), else from its log lines;
    `served_metrics` the endpoint's own state (None when the run names none,
    its `error` when a read fails); `eval_*` the last
    evaluation metrics the log printed (`eval/`, `val/`), never the training ones.

    Line counts are of different sets of lines: `lines_seen` went into the ring
    (the log's last `window_bytes` when loaded, then every new line);
    `lines_parsed` + `lines_unparsed` are the lines given to the parser (the step
    lines the host sent for the history, sampled, then every new line), with and
    without metrics; `history_step_lines` the log's step lines when loaded.
    """

    name: str
    host: str
    log: str | None
    process_pattern: str | None
    seq: int
    taken_at: float
    state: RunState
    state_reason: str
    state_since: float | None
    step: int | None
    total_steps: int | None
    progress: float | None
    loss: Trend
    acc: Trend
    tokens_per_s: float | None
    lr: float | None
    epoch: float | None
    steps_per_s: float | None
    eta_s: float | None
    acc_per_position: tuple[float, ...] | None
    acc_per_position_step: int | None
    tau: TauEstimate
    log_changed_at: float | None
    log_size_bytes: int | None
    last_line_at: float | None
    processes: tuple[ProcessInfo, ...]
    lines: tuple[LogLine, ...]
    last_seq: int
    series: HistorySeries
    tail_status: str
    tail_error: str | None
    lines_seen: int
    lines_parsed: int
    lines_unparsed: int
    history_points: int
    history_step_lines: int
    restarts: int
    host_reachable: bool | None
    stall_after_s: float
    notices: tuple[TailNotice, ...] = ()
    acceptance: Acceptance | None = None
    served_metrics: EndpointStatus | None = None
    eval_loss: float | None = None
    eval_acc: float | None = None
    eval_step: int | None = None
    # The trainer's own acceptance-length estimate, as its tracker logged it:
    # `trainer_tau_source` names the scalar (eval/simulated_acc_len, train/eal,
    # estimated_training_ar, validate_ar, ...), beside the console's `tau`.
    trainer_tau: float | None = None
    trainer_tau_source: str | None = None
    trainer_tau_step: int | None = None
    tracker: TrackerView | None = None
    # Per-position accuracy by step, latest last: training (from the log or the
    # tracker) and held-out (the tracker's eval/val per-position values).
    acc_per_position_steps: PositionSteps = ()
    eval_acc_per_position_steps: PositionSteps = ()

    def _acceptance_dict(self) -> dict[str, Any] | None:
        if self.acceptance is None:
            return None
        served = self.acceptance.as_dict()
        del served["per_position"]
        return served

    @property
    def log_age_s(self) -> float | None:
        """Seconds since the log last changed, at `taken_at`."""
        return self.age_s(self.taken_at)

    def age_s(self, now: float) -> float | None:
        """Seconds since the log last changed, at `now` (for a ticking display)."""
        return None if self.log_changed_at is None else max(0.0, now - self.log_changed_at)

    def lines_after(self, seq: int) -> tuple[LogLine, ...]:
        """Lines of the ring with `seq` greater than `seq`."""
        if not self.lines or self.lines[-1].seq <= seq:
            return ()
        first = self.lines[0].seq
        return self.lines[max(0, seq + 1 - first) :]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no series, no log lines) for `status --json`."""

        def trend(t: Trend) -> dict[str, Any]:
            return {"last": t.last, "ema": t.ema, "slope_per_1k_steps": t.slope_per_1k_steps}

        return {
            "name": self.name,
            "host": self.host,
            "log": self.log,
            "state": self.state.value,
            "state_reason": self.state_reason,
            "step": self.step,
            "total_steps": self.total_steps,
            "progress": self.progress,
            "loss": trend(self.loss),
            "acc": trend(self.acc),
            "tokens_per_s": self.tokens_per_s,
            "lr": self.lr,
            "epoch": self.epoch,
            "steps_per_s": self.steps_per_s,
            "eta_s": self.eta_s,
            "acc_per_position": list(self.acc_per_position) if self.acc_per_position else None,
            "tau": self.tau.as_dict(),
            "trainer_tau": (
                {
                    "value": self.trainer_tau,
                    "source": self.trainer_tau_source,
                    "step": self.trainer_tau_step,
                }
                if self.trainer_tau is not None
                else None
            ),
            "eval": (
                {"loss": self.eval_loss, "acc": self.eval_acc, "step": self.eval_step}
                if self.eval_loss is not None or self.eval_acc is not None
                else None
            ),
            "acceptance_length": self._acceptance_dict(),
            "acceptance_per_position": (
                list(self.acceptance.per_position)
                if self.acceptance is not None and self.acceptance.per_position
                else None
            ),
            "served_metrics": (
                self.served_metrics.as_dict() if self.served_metrics is not None else None
            ),
            "log_age_s": self.log_age_s,
            "log_size_bytes": self.log_size_bytes,
            "processes": [p.as_dict() for p in self.processes],
            "tail_status": self.tail_status,
            "tail_error": self.tail_error,
            "lines_parsed": self.lines_parsed,
            "lines_unparsed": self.lines_unparsed,
            "history_points": self.history_points,
            "restarts": self.restarts,
            "stall_after_s": self.stall_after_s,
            "tracker": self.tracker.as_dict() if self.tracker is not None else None,
            "acc_per_position_steps": _steps(self.acc_per_position_steps),
            "eval_acc_per_position_steps": _steps(self.eval_acc_per_position_steps),
        }


def _steps(steps: PositionSteps) -> list[dict[str, Any]] | None:
    return [{"step": s, "values": list(v)} for s, v in steps] if steps else None


@dataclass(frozen=True)
class HostView:
    """One host as the hosts pane shows it: reachability, latency, GPUs, its runs."""

    name: str
    address: str
    via: str | None
    seq: int
    taken_at: float
    reachable: bool | None
    error: str | None
    latency_ms: float | None
    probed_at: float | None
    gpus: tuple[GpuInfo, ...]
    gpu_error: str | None
    has_nvidia_smi: bool | None
    clock_offset_s: float | None
    runs: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gpu_summary(self) -> str:
        if self.gpu_error:
            return "error"
        return summarize(self.gpus)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "via": self.via,
            "reachable": self.reachable,
            "error": self.error,
            "latency_ms": self.latency_ms,
            "gpus": [g.as_dict() for g in self.gpus],
            "gpu_error": self.gpu_error,
            "has_nvidia_smi": self.has_nvidia_smi,
            "clock_offset_s": self.clock_offset_s,
            "runs": list(self.runs),
        }


@dataclass(frozen=True)
class MonitorSnapshot:
    """Every run and host at one moment."""

    taken_at: float
    runs: tuple[RunView, ...]
    hosts: tuple[HostView, ...]


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class RunUpdated:
    """Something about `run` changed; `seq` is the new `RunView.seq`."""

    run: str
    seq: int


@dataclass(frozen=True)
class LinesAppended:
    """Lines `first_seq..last_seq` were added to `run`'s ring."""

    run: str
    first_seq: int
    last_seq: int


@dataclass(frozen=True)
class RunStateChanged:
    """`run` went from `old` to `new` (alive, stalled, dead, unknown): worth an alert."""

    run: str
    old: RunState
    new: RunState
    reason: str


@dataclass(frozen=True)
class HostUpdated:
    """A probe of `host` finished (or failed); `seq` is the new `HostView.seq`."""

    host: str
    seq: int


@dataclass(frozen=True)
class HostReachabilityChanged:
    """`host` became reachable or unreachable (`error` says why)."""

    host: str
    reachable: bool
    error: str | None


@dataclass(frozen=True)
class AcceptanceDropped:
    """`run`'s served acceptance length fell well below its own recent level: worth an alert."""

    run: str
    value: float
    level: float


MonitorEvent = (
    RunUpdated
    | LinesAppended
    | RunStateChanged
    | HostUpdated
    | HostReachabilityChanged
    | AcceptanceDropped
)
