"""A run's detail screen (`enter`): everything its snapshot holds, on one page."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from dflash_tui.monitor.history import Trend
from dflash_tui.monitor.views import RunView
from dflash_tui.ui import actions
from dflash_tui.ui import format as fmt
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.panes.runs import state_label


def _trend_line(name: str, trend: Trend, lower_is_better: bool) -> str:
    arrow, good = fmt.trend_arrow(trend, lower_is_better)
    slope = trend.slope_per_1k_steps
    slope_text = "-" if slope is None else f"{slope:+.4f} per 1k steps"
    verdict = {True: "improving", False: "getting worse", None: "flat or unknown"}[good]
    return (
        f"{name:<11}last {fmt.number(trend.last)}  ema {fmt.number(trend.ema)}  "
        f"slope {slope_text} {arrow} ({verdict}, {trend.points} points)"
    )


def detail_text(view: RunView, now: float) -> Text:
    out = Text()
    label, _ = state_label(view, wide=True)
    out.append(f"{view.name}", "bold")
    out.append(f" on {view.host}: ")
    out.append(label, "bold")
    out.append(f" ({view.state_reason})\n")
    if view.state_since is not None:
        out.append(f"{'':<11}in this state for {fmt.duration(now - view.state_since)}\n", "dim")
    out.append("\n")
    out.append(
        f"{'Progress':<11}step {fmt.step(view.step, view.total_steps)}"
        f"  {fmt.percent(view.progress, 1)}  eta {fmt.duration(view.eta_s)}"
    )
    if view.steps_per_s is not None:
        out.append(f"  {view.steps_per_s:.2f} steps/s")
    if view.epoch is not None:
        out.append(f"  epoch {view.epoch:.3f}")
    out.append("\n")
    out.append(_trend_line("Loss", view.loss, True) + "\n")
    out.append(_trend_line("Acc", view.acc, False) + "\n")
    lr = "-" if view.lr is None else f"{view.lr:.2e}"
    out.append(f"{'Throughput':<11}{fmt.compact(view.tokens_per_s)} tokens/s  lr {lr}\n")
    tau = view.tau
    if tau.value is None:
        out.append(f"{'Tau':<11}no estimate: {tau.missing or tau.basis}\n")
    else:
        upper = "" if tau.upper is None else f" (upper bound {tau.upper:.2f})"
        extra = " extrapolated" if tau.extrapolated else ""
        out.append(f"{'Tau':<11}{tau.value:.2f}{upper}{extra}: {tau.basis}\n")
    if view.trainer_tau is not None:
        out.append(
            f"{'Trainer':<11}{view.trainer_tau:.2f}: the trainer's own estimate, "
            f"{view.trainer_tau_source} at step {fmt.step(view.trainer_tau_step)}\n"
        )
    served = view.acceptance
    if served is not None:
        slope = served.slope_per_100_reports
        level = "-" if served.level is None else f"{served.level:.2f}"
        out.append(
            f"{'Served':<11}acceptance length last {fmt.number(served.last, 2)}  "
            f"ema {fmt.number(served.ema, 2)}  "
            f"slope {'-' if slope is None else f'{slope:+.3f} per 100 reports'}  "
            f"recent level {level} ({served.reports} reports)\n"
        )
        if served.accept_rate is not None:
            out.append(f"{'':<11}draft tokens accepted {served.accept_rate:.3f}\n")
        if served.dropped:
            out.append(f"{'':<11}well below its recent level\n", "bold")
        if served.per_position:
            out.append("\nServed acceptance rate per position\n")
            for i, rate in enumerate(served.per_position, start=1):
                out.append(f"  {i:>2} {fmt.bar(rate, 30)} {rate:.3f}\n")
    _served_source(out, view)
    if view.eval_loss is not None or view.eval_acc is not None:
        out.append(
            f"{'Eval':<11}loss {fmt.number(view.eval_loss)}  acc {fmt.number(view.eval_acc)}"
            f"  (step {fmt.step(view.eval_step)}; kept apart from training)\n"
        )
    if view.acc_per_position:
        out.append(f"\nAcc per position (step {fmt.step(view.acc_per_position_step)})\n")
        for i, acc in enumerate(view.acc_per_position, start=1):
            out.append(f"  {i:>2} {fmt.bar(acc, 30)} {acc:.3f}\n")
    out.append("\nProcesses")
    if view.process_pattern:
        out.append(f" matching {view.process_pattern!r}", "dim")
    out.append("\n")
    if not view.processes:
        out.append("  none found\n", "dim")
    for proc in view.processes:
        out.append(f"  pid {proc.pid}  up {fmt.uptime(proc.elapsed_s)}  {proc.command}\n")
    out.append("\n")
    tracker = view.tracker
    if tracker is not None:
        corrupt = f", {tracker.corrupt} corrupt (skipped)" if tracker.corrupt else ""
        out.append(
            f"{'Tracker':<11}{tracker.kind} {tracker.path}  {tracker.status}  "
            f"{tracker.records} records, {tracker.scalars} scalars{corrupt}\n"
        )
    if view.log is not None or tracker is None:
        out.append(
            f"{'Log':<11}{view.log}  {fmt.size(view.log_size_bytes)}"
            f"  changed {fmt.duration(view.age_s(now))} ago  tail {view.tail_status}\n"
        )
    if view.tail_error:
        out.append(f"{'':<11}{view.tail_error}\n", "bold")
    _line_counts(out, view)
    return out


def _served_source(out: Text, view: RunView) -> None:
    """Where a server's numbers come from: its /metrics while that answers, else its log."""
    metrics = view.served_metrics
    if metrics is None:
        if view.acceptance is not None:
            out.append(f"{'':<11}from the server's log lines\n", "dim")
        return
    if view.acceptance is not None and view.acceptance.source == "metrics":
        last = metrics.last
        window = "-"
        if last is not None:
            window = (
                "since the server started"
                if last.window_s is None
                else (f"last window {fmt.duration(last.window_s)}")
            )
            if last.drafts is not None:
                window += f", {last.drafts:g} drafts"
        restarts = f", {metrics.resets} restarts seen" if metrics.resets else ""
        out.append(f"{'':<11}from {metrics.url} ({metrics.kind}, {window}{restarts})\n", "dim")
        return
    why = metrics.error or "no drafts counted there yet"
    shown = "the log's lines stand" if view.acceptance is not None else "nothing to show"
    out.append(f"{'Metrics':<11}{metrics.url}: {why}; {shown}\n", "bold" if metrics.error else "")


def _line_counts(out: Text, view: RunView) -> None:
    """Three counts of three different sets of lines, each named for what it counts (one
    `Lines N seen, M parsed` read as one set, and M could exceed N)."""
    read = view.lines_parsed + view.lines_unparsed
    out.append(
        f"{'Read':<11}{read} lines for metrics: {view.lines_parsed} with metrics, "
        f"{view.lines_unparsed} without\n"
    )
    out.append(
        f"{'':<11}(step lines of the log when loaded, sampled; then every new line)\n", "dim"
    )
    out.append(
        f"{'Log pane':<11}{view.lines_seen} lines received (the log's end, then new ones); "
        f"last {len(view.lines)} kept\n"
    )
    out.append(
        f"{'History':<11}{view.history_points} points from {view.history_step_lines} loaded "
        f"step lines + new ones; {view.restarts} restarts\n"
    )


class DetailScreen(Guarded, Screen[None]):
    BINDINGS = actions.bindings(actions.DETAIL)
    screen_name = actions.DETAIL

    def __init__(self, run: str) -> None:
        super().__init__()
        self.run = run
        self._view: tuple[RunView, float] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-scroll"):
            yield Static("", id="detail-body")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#detail-scroll").focus()
        self._draw()

    def update_view(self, view: RunView, now: float) -> None:
        """Show `view` (stored until the screen is composed)."""
        self._view = (view, now)
        self._draw()

    def _draw(self) -> None:
        if self._view is None:
            return
        body = self.query("#detail-body")
        if body:
            body.first(Static).update(detail_text(*self._view))
