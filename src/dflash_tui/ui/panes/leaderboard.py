"""The eval leaderboard pane: per suite, checkpoints ranked against the baseline drafter.

One suite at a time (`s` cycles); rows are the core's `Leaderboard` rows in
its order (one ranking per attention semantics, the default's first; a row of
another names it, as `step4000 [causal]`): the metrics it lists, the sort metric's ratio to the baseline,
the training step, and when it was measured (or the state of the job that
is measuring it, or "waiting (auto-eval)" for a complete checkpoint the
auto-eval queues when a slot frees). `e` evaluates the selected checkpoint
on this suite, `b` makes it the baseline, enter shows its per-task results,
`p` plots its run's progress over training. Until eval support
is available (or no suite is configured), the pane says what will appear.

The headline is `tau_greedy` (greedy speculative decoding on the suite's
prompts), with `tau_top1` (the mean over every anchor) beside it; the caption's
second line says which is which and whether `tau_greedy` is exact or walked on
the cache's labels (`Leaderboard.legend_brief`).

Served results (`dflash-tui import`: tau from real decoding) sit below, in a table
of their own under a label saying so, never ranked with the offline rows; the
section is absent while the suite has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from dflash_tui.evals.results.leaderboard import format_metric, format_ratio
from dflash_tui.evals.results.served.beside import format_gap, served_beside, unlike_settings
from dflash_tui.evals.results.served.board import (
    SERVED_LABEL,
    SPREAD_NOTE,
    format_speedup,
    format_tau,
    row_cells,
)
from dflash_tui.ui import format as fmt
from dflash_tui.ui.actions import binding_for
from dflash_tui.ui.guard import Guarded
from dflash_tui.ui.panes.base import PaneMixin, cursor_row_key

# a served bench's numbers beside the offline ones (shown while the suite has one)
SERVED_LABELS = {
    "served_tau": "served tau",
    "served_speedup": "speedup",
    "served_gap": "served - greedy",
}
PLACEHOLDER = (
    "Checkpoints ranked by acceptance length (tau) on each eval suite will appear here, "
    "with acc and streaks, their ratio to the baseline drafter, the training step and when "
    "they were measured. Define [[suites]] and [[checkpoints]] in hosts.toml; evals run as "
    "jobs on the suite's host (e on a row, or auto_eval on a run)."
)
WAITING = "waiting (auto-eval)"  # complete, queued by the auto-eval when a slot frees
MAX_METRICS_COMPACT = 3
MAX_METRICS_WIDE = 6


class LeaderboardTable(Guarded, DataTable):
    """Rows keyed by checkpoint name; enter opens the per-task drill-down."""

    BINDINGS = [binding_for("leaderboard.tasks")]
    COMPONENT_CLASSES = {"board--baseline", "board--dim", "board--job"}


class ServedTable(Guarded, DataTable):
    """The suite's served rows (real decoding): read-only, the keys act on the offline rows."""

    can_focus = False


class LeaderboardPane(PaneMixin, Vertical):
    pane_name = "leaderboard"
    can_focus = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.boards: tuple[Any, ...] = ()
        self.suite_index = 0
        self._jobs: tuple[Any, ...] = ()
        self._available = False
        self._error: str | None = None
        self._now = 0.0
        self._shape: tuple[object, ...] = ()
        self._waiting: dict[str, frozenset[str]] = {}
        self._served: dict[str, Any] = {}
        self._served_shape: tuple[object, ...] = ()
        self._width = 0  # the width the columns were fitted to

    def compose(self) -> ComposeResult:
        yield Static(PLACEHOLDER, id="board-caption", markup=False)
        yield LeaderboardTable(id="board-table", cursor_type="row", cell_padding=1)
        yield Static(SERVED_LABEL, id="served-caption", markup=False)
        yield ServedTable(id="served-table", cursor_type="none", cell_padding=1)

    @property
    def table(self) -> LeaderboardTable:
        return self.query_one(LeaderboardTable)

    def update_leaderboard(
        self,
        available: bool,
        boards: Sequence[Any],
        jobs: Sequence[Any],
        now: float,
        suite_index: int = 0,
        error: str | None = None,
        waiting: Mapping[str, frozenset[str]] | None = None,
        served: Mapping[str, Any] | None = None,
    ) -> None:
        """Store what to show; `waiting` is, per suite, the checkpoints the auto-eval
        queues next (they say so instead of "not evaluated"); `served`, per suite, its
        `evals.results.served.board.ServedSection`."""
        self._available, self._error = available, error
        self._waiting = dict(waiting or {})
        self._served = dict(served or {})
        self.boards, self._jobs, self._now = tuple(boards), tuple(jobs), now
        self.suite_index = suite_index % len(self.boards) if self.boards else 0
        self.draw_or_defer()

    @property
    def board(self) -> Any | None:
        return self.boards[self.suite_index] if self.boards else None

    @property
    def selected_row(self) -> Any | None:
        board = self.board
        if board is None or (key := cursor_row_key(self.table)) is None:
            return None
        return next((r for r in board.rows if r.key == key), None)

    def draw(self) -> None:
        caption = self.query_one("#board-caption", Static)
        table = self.table
        board = self.board
        if not self._available or board is None:
            caption.update(self._error or PLACEHOLDER)
            caption.add_class("placeholder")
            table.display = False
            self._draw_served(None)
            return
        caption.remove_class("placeholder")
        table.display = True
        caption.update(self._caption(board))
        self._width = self.size.width
        wide = self.size.width >= 110
        metrics = list(board.columns)[: MAX_METRICS_WIDE if wide else MAX_METRICS_COMPACT]
        beside = self._beside(board)
        labels = {
            "rank": "#",
            "checkpoint": "checkpoint",
            "step": "step",
            **{m: m for m in metrics},
            "ratio": f"vs {board.baseline or 'baseline'}",
            **(SERVED_LABELS if beside else {}),
            "when": "measured",
        }
        rows = [
            (
                row.key,
                self._served_cells(
                    self._cells(board, row, row.rank or i, metrics), beside.get(row.checkpoint)
                ),
            )
            for i, row in enumerate(board.rows, start=1)
        ]
        keys = self._fit(labels, [cells for _, cells in rows], board.sort)
        shape = (board.suite, tuple(keys), labels["ratio"])
        if shape != self._shape:
            self._shape = shape
            table.clear(columns=True)
            for key in keys:
                table.add_column(labels[key], key=key)
        selected = self.selected_row
        table.clear()
        for key, cells in rows:
            table.add_row(*(cells[k] for k in keys), key=key)
        if selected is not None:
            keys = [r.key for r in board.rows]
            if selected.key in keys:
                table.move_cursor(row=keys.index(selected.key), animate=False)
        self._draw_served(self._served.get(board.suite))

    def _fit(self, labels: dict[str, str], rows: list[dict[str, Text]], sort: str) -> list[str]:
        """The columns that fit the pane, taken by priority (the checkpoint, the sort
        metric, its ratio to the baseline, when it was measured or the job measuring it,
        the rank, tau_top1 when the sort is tau_greedy (the decoding path's number and
        the all-anchor one side by side), acc, the step (a run's checkpoint names hold it
        too), then the other metrics), shown in `labels`' order. A cut header (`measure`)
        or a cut job state is never shown: the column goes instead."""
        room = self.size.width - 2  # a vertical scrollbar's gutter, when rows overflow
        if room <= 0:
            return list(labels)  # not laid out yet: a resize draws again
        pad = 2 * self.table.cell_padding
        need = {
            key: pad + max([len(label), *(cells[key].cell_len for cells in rows)])
            for key, label in labels.items()
        }
        beside = ["tau_top1"] if sort == "tau_greedy" else []  # the all-anchor number too
        served = [k for k in SERVED_LABELS if k in labels]
        first = ["checkpoint", sort, *served, "ratio", "when", "rank", *beside, "acc", "step"]
        order = [k for k in first if k in labels] + [k for k in labels if k not in first]
        kept: set[str] = set()
        for key in order:
            if sum(need[k] for k in kept) + need[key] <= room:
                kept.add(key)
        return [key for key in labels if key in kept]

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._width:
            self.redraw()

    def _draw_served(self, section: Any | None) -> None:
        """The served section under the offline table; hidden while there is nothing in it."""
        caption = self.query_one("#served-caption", Static)
        table = self.query_one(ServedTable)
        rows = section.rows if section is not None else ()
        caption.display = table.display = bool(rows)
        if not rows:
            return
        caption.update(f"{SERVED_LABEL}: {len(rows)} row{'s' if len(rows) != 1 else ''}")
        wide = self.size.width >= 110
        columns = [
            ("checkpoint", "checkpoint"),
            ("task", "task"),
            ("method", "method"),
            ("served_tau", "served tau"),
            ("tok_s", "tok/s"),
            ("speedup", "speedup"),
        ]
        if wide:
            columns += [("settings", "settings"), ("format", "from")]
        if wide and any(row_cells(r)["req_tau"] != "-" for r in rows):
            # the per-request spread beside the token-weighted tau
            columns[4:4] = [("req_tau", "mean/req"), ("tau_spread", "p10/p50/p90")]
        if tuple(columns) != self._served_shape:
            self._served_shape = tuple(columns)
            table.clear(columns=True)
            for key, label in columns:
                table.add_column(label, key=key)
        table.clear()
        numeric = {"served_tau", "req_tau", "tau_spread", "tok_s", "speedup"}
        for row in rows:
            cells = row_cells(row)
            table.add_row(
                *(Text(cells[k], justify="right" if k in numeric else "left") for k, _ in columns)
            )
        # Its height from the rows it holds (header + rows; max-height still caps it):
        # `height: auto` reads the DataTable's virtual size, which it updates on a later
        # idle, so a layout pass that came first left the table 0 rows high for good.
        table.styles.height = len(rows) + 1

    def _caption(self, board: Any) -> Text:
        out = Text()
        out.append(board.suite, "bold")
        if len(self.boards) > 1:
            out.append(f" ({self.suite_index + 1}/{len(self.boards)}, s: next suite)")
        base = board.baseline or "none"
        how = {"override": "marked with b", "config": "from hosts.toml"}.get(
            board.baseline_source or "", ""
        )
        out.append(f"  baseline {base}" + (f" ({how})" if how else ""))
        out.append(f"  sorted by {board.sort}")
        out.append("  p: progress", self._style("dim"))  # not in the footer: it is full at 80
        if board.legend_brief:  # which number is the decoding path's, which the anchors'
            out.append(f"\n{board.legend_brief}", self._style("dim"))
        if board.note:
            out.append(f"\n{board.note}", self._style("dim"))
        differ = unlike_settings(list(self._beside(board).values()))
        if differ:  # never ranked as alike: say which setting differs
            out.append(f"\nserved benches differ in {', '.join(differ)}: not comparable")
        if any(b.speedup_unsure for b in self._beside(board).values()):
            out.append(f"\n{SPREAD_NOTE}", self._style("dim"))
        return out

    def _style(self, name: str) -> Any:
        return self.table.get_component_rich_style(f"board--{name}", partial=True)

    def _job_for(self, suite: str, checkpoint: str) -> Any | None:
        for job in self._jobs:  # newest first
            if job.suite == suite and job.checkpoint == checkpoint and not job.terminal:
                return job
        return None

    def _beside(self, board: Any) -> dict[str, Any]:
        """Each checkpoint's newest served bench on this suite, with its gap to tau_greedy
        (evals/results/served/beside.py); empty when the suite has none."""
        section = self._served.get(board.suite)
        if section is None or not section.rows:
            return {}
        offline = {
            r.checkpoint: (r.metrics, r.result.tasks if r.result else {}) for r in board.rows
        }
        return served_beside(section.rows, offline)

    @staticmethod
    def _served_cells(cells: dict[str, Text], beside: Any | None) -> dict[str, Text]:
        """The served columns of one row: tau, speedup, and the gap to tau_greedy with the
        part the drafts past max_tokens explain (`!`: more is left)."""
        gap = beside.suite_gap if beside is not None else None
        cells["served_tau"] = Text(format_tau(beside.tau) if beside else "-", justify="right")
        cells["served_speedup"] = Text(
            format_speedup(beside.speedup, beside.speedup_low, beside.speedup_high)
            if beside
            else "-",
            justify="right",
        )
        style = "bold red" if gap is not None and gap.flagged else ""
        cells["served_gap"] = Text(format_gap(gap), style=style)
        return cells

    def _cells(self, board: Any, row: Any, rank: int, metrics: list[str]) -> dict[str, Text]:
        """One row; a row outside the default semantics' ranking names its own (`Row.key`)
        and is ranked within it; `*` marks a result read as causal for want of the field."""
        base_style = self._style("baseline") if row.baseline else ""
        name = row.key + (" (baseline)" if row.baseline else "")
        name += "*" if row.attention_assumed else ""
        cells = {
            "rank": Text(str(rank) if row.metrics else "-", style=base_style),
            "checkpoint": Text(name, style=base_style),
            "step": Text(fmt.step(row.step), justify="right"),
        }
        for m in metrics:
            cells[m] = Text(format_metric(m, row.metrics.get(m)), justify="right")
        ratio = row.ratios.get(board.sort)
        cells["ratio"] = Text(format_ratio(ratio, board.baseline) if not row.baseline else "")
        job = self._job_for(board.suite, row.checkpoint)
        if job is not None:
            cells["when"] = Text(job.describe(), style=self._style("job"))
        elif row.created_at is not None:
            cells["when"] = Text(f"{fmt.short_duration(self._now - row.created_at)} ago")
        elif row.checkpoint in self._waiting.get(board.suite, ()):
            cells["when"] = Text(WAITING, style=self._style("job"))
        else:
            cells["when"] = Text("not evaluated (e)", style=self._style("dim"))
        return cells
