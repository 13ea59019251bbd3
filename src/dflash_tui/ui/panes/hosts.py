"""The hosts pane: per host, reachability and latency, each GPU's utilisation and memory
as bars, its temperature, power draw against its limit, why its clocks are held
down (where nvidia-smi says), and who holds it, as nvitop shows: each compute
process matched to a configured run (the process, or its session, is one of the
run's) or to an eval job (the job's session leader), with its memory. A GPU doing
nothing on a host whose run is alive is flagged. Then the training processes the
probes found; then each store (`[stores.NAME]`): reachable, latency of one
HeadBucket, its URL. See `docs/console.md` "What is on screen"."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from dflash_tui.core.units import MiB
from dflash_tui.monitor.gpu import GpuInfo, GpuProcess
from dflash_tui.monitor.liveness import RunState
from dflash_tui.monitor.views import HostView, RunView
from dflash_tui.ui import format as fmt
from dflash_tui.ui.panes.base import PaneMixin, same_text

if TYPE_CHECKING:
    from dflash_tui.evals.jobs.job import Job

FRESH_PROBE_S = 10  # a probe younger than this reads "<10s ago": it is current


def probe_age(age_s: float) -> str:
    """How old a host's last probe is. A current one reads `<10s`, so the pane is not
    repainted for an age that only moved from 0s to 2s between two probes; a late
    probe counts up in seconds as before."""
    return f"<{FRESH_PROBE_S}s" if age_s < FRESH_PROBE_S else fmt.short_duration(age_s)


GPU_REPAINT_S = 10.0  # GPU bars and latencies alone move at most this often (they jitter)


IDLE_UTIL_PCT = 5.0  # below this a GPU counts as idle
ONE_LINE_MIN_WIDTH = 150  # narrower: a GPU's temperature, power and owners on a second line


def gpu_name(name: str) -> str:
    return name.removeprefix("NVIDIA ").strip()


def owner_of(proc: GpuProcess, host: str, runs: Sequence[RunView], jobs: Sequence[Job]) -> str:
    """Who a GPU process belongs to: a run of this host (its pid or session is one of the
    run's processes'), a job here, named by its kind (`eval ab12`, `bench`, `cache`:
    the job's pid, a session leader, is the process or its session),
    or, unknown, its command's first word (`?` when the probe could not see it)."""
    for run in runs:
        if run.host != host:
            continue
        for p in run.processes:
            if proc.pid == p.pid or (proc.sid is not None and proc.sid in (p.sid, p.pid)):
                return run.name
    for job in jobs:
        if job.host == host and job.pid and job.pid in (proc.pid, proc.sid):
            return f"{job.kind} {job.id[-4:]}"  # eval, bench, cache
    word = proc.command.split(None, 1)[0] if proc.command else "?"
    return word.rsplit("/", 1)[-1][:20]


def is_idle(gpu: GpuInfo) -> bool:
    return gpu.util_pct is not None and gpu.util_pct < IDLE_UTIL_PCT


class HostsPane(PaneMixin, ScrollView, can_focus=True):
    """`update_hosts` stores hosts and runs; `draw` writes the lines and repaints only
    the ones that changed.

    A line-API pane: each line is rendered to a Strip once and again only when
    its text changed. The GPU lines of a busy host move every probe; re-rendering
    the whole pane for them was most of a quiet console's cost (bench/ui_idle.py).
    """

    pane_name = "hosts"
    COMPONENT_CLASSES = {
        "hosts--up",
        "hosts--down",
        "hosts--unknown",
        "hosts--dim",
        "hosts--name",
        "hosts--warn",
    }

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._hosts: tuple[HostView, ...] = ()
        self._runs: tuple[RunView, ...] = ()
        self._jobs: tuple[Job, ...] = ()  # owners of GPU processes
        self._stores: tuple[Any, ...] = ()  # transfer.s3.probe.StoreCheck
        self._now = 0.0
        self._width = 0
        self._shown: tuple[str, list[Any]] = ("", [])  # text and spans of the last draw
        self._drawn_at = 0.0  # monotonic time of the last repaint
        self._rest: tuple[str, set[str]] = ("", set())  # last repaint: text less jitter, styles
        # Where this draw's jittering numbers are (GPU lines, latencies): a change there
        # alone is held for GPU_REPAINT_S.
        self._jitter: list[tuple[int, int]] = []
        self._lines: list[Text] = []  # the lines shown
        self._strips: dict[int, tuple[int, Strip]] = {}  # line number: (width, rendered line)
        self.line_renders = 0  # lines rendered to strips (tests read it)

    @property
    def shown_text(self) -> str:
        """The pane's text as it is shown now (for tests and people reading the code)."""
        return "\n".join(line.plain for line in self._lines)

    def update_hosts(
        self,
        hosts: Sequence[HostView],
        runs: Sequence[RunView],
        now: float,
        stores: Sequence[Any] = (),
        jobs: Sequence[Job] = (),
    ) -> None:
        self._hosts, self._runs, self._now = tuple(hosts), tuple(runs), now
        self._stores = tuple(stores)
        self._jobs = tuple(jobs)
        self.draw_or_defer()

    def on_resize(self, event: events.Resize) -> None:
        # Bars and clipped errors follow the width; render_line re-cuts the strips.
        if event.size.width != self._width:
            self.redraw()

    def notify_style_update(self) -> None:
        # Kept strips carry the colours of the text they were cut from (the base style
        # is applied per render): only a real change of style needs a new draw, and
        # the component styles are applied after this call, so look once it returns.
        super().notify_style_update()
        self.call_later(self.redraw_if_restyled)

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"hosts--{name}", partial=True)

    def _jitter_text(self, out: Text, text: str) -> None:
        """Append numbers that move on every probe or ping without news (a latency):
        shown again at most every GPU_REPAINT_S, as GPU numbers are."""
        start = len(out)
        out.append(text)
        self._jitter.append((start, len(out)))

    def draw(self) -> None:
        self._width = self.size.width
        width = max(40, self.scrollable_content_region.width or 80)
        bar_w = 20 if width >= 110 else 10
        out = Text(no_wrap=True, overflow="ellipsis")
        self._jitter = []
        if not self._hosts and not self._stores:
            out.append("No hosts in the config.", self._style("dim"))
        for i, host in enumerate(self._hosts):
            if i:
                out.append("\n")
            self._host_lines(out, host, width, bar_w)
        for store in self._stores:
            out.append("\n")
            self._store_lines(out, store, width)
        plain = out.plain
        shown = (plain, list(out.spans))
        if shown == self._shown:
            return  # nothing a reader could see changed: no repaint
        # The text less its GPU lines and latencies: what must show at once when it
        # changes. (Latencies held too: three hosts pinged at different moments each
        # let every GPU line through, every few seconds instead of every 10 s.)
        cuts = [0, *(i for span in self._jitter for i in span), len(plain)]
        rest = (
            "".join(plain[cuts[i] : cuts[i + 1]] for i in range(0, len(cuts), 2)),
            {str(span.style) for span in shown[1]},  # a new theme shows at once too
        )
        now = time.monotonic()
        if self._shown[0] and rest == self._rest and now - self._drawn_at < GPU_REPAINT_S:
            return  # only GPU numbers or latencies moved: shown again on a later probe
        self._shown, self._rest, self._drawn_at = shown, rest, now
        self._show_lines(list(out.split("\n", allow_blank=True)))

    def _show_lines(self, lines: list[Text]) -> None:
        """Keep the lines that did not change; repaint those that did. A new number of
        lines needs a layout pass (the scrollbar may come or go); the same number
        only a repaint of the changed lines."""
        old = self._lines
        self._lines = lines
        if len(lines) != len(old):
            self._strips.clear()
            self.virtual_size = Size(0, len(lines))
            self.refresh()
            return
        for y, (was, now) in enumerate(zip(old, lines, strict=True)):
            if not same_text(was, now):
                self._strips.pop(y, None)
                self.refresh_line(y)

    def render_line(self, y: int) -> Strip:
        base = self.rich_style
        width = self.scrollable_content_region.width
        index = self.scroll_offset.y + y
        if index >= len(self._lines):
            return Strip.blank(width, base)
        cached = self._strips.get(index)
        if cached is None or cached[0] != width:  # a scrollbar came or went: cut again
            self.line_renders += 1
            line = self._lines[index].copy()
            line.truncate(width, overflow="ellipsis")
            cached = self._strips[index] = (width, Strip(line.render(self.app.console)))
        return cached[1].crop_extend(0, width, base).apply_style(base)

    def _reach_head(
        self, out: Text, name: str, reachable: bool | None, latency_ms: float | None, where: str
    ) -> None:
        """The start of a host's or a store's line: name, up/DOWN, latency, address."""
        if reachable is None:
            status, style = "connecting...", "unknown"
        elif reachable:
            status, style = "up", "up"
        else:
            status, style = "DOWN", "down"
        out.append(f"{name:<12}", self._style("name"))
        out.append(f" {status:<13}", self._style(style))
        latency = "-" if latency_ms is None else f"{latency_ms:.1f} ms"
        self._jitter_text(out, f" {latency:>9}")
        out.append(f"  {where}")

    def _store_lines(self, out: Text, store: Any, width: int) -> None:
        self._reach_head(out, store.store, store.reachable, store.latency_ms, store.url)
        out.append(
            "  store" + (f" at {store.endpoint}" if store.endpoint else ""), self._style("dim")
        )
        if store.probed_at:
            age = max(0.0, self._now - store.probed_at)
            out.append(f"  probed {probe_age(age)} ago", self._style("dim"))
        out.append("\n")
        if store.error:
            out.append("  " + fmt.clip(store.error, width - 2) + "\n", self._style("down"))

    def _host_lines(self, out: Text, host: HostView, width: int, bar_w: int) -> None:
        self._reach_head(out, host.name, host.reachable, host.latency_ms, host.address)
        if host.via:
            out.append(f"  via {host.via}", self._style("dim"))
        age = None if host.probed_at is None else self._now - host.probed_at
        if age is not None:
            out.append(f"  probed {probe_age(age)} ago", self._style("dim"))
        out.append("\n")
        if host.error:
            out.append("  " + fmt.clip(host.error, width - 2) + "\n", self._style("down"))
        if host.gpu_error:
            out.append(
                "  nvidia-smi: " + fmt.clip(host.gpu_error, width - 14) + "\n", self._style("down")
            )
        elif host.has_nvidia_smi is False:
            out.append("  no GPUs (no nvidia-smi)\n", self._style("dim"))
        alive = [r.name for r in self._runs if r.host == host.name and r.state == RunState.ALIVE]
        for gpu in host.gpus:
            self._gpu_lines(out, host.name, gpu, width, bar_w, alive)
        for run in self._runs:
            if run.host != host.name:
                continue
            if not run.processes:
                if run.process_pattern and host.reachable:
                    out.append(f"  {run.name}: no process", self._style("dim"))
                    out.append(f" matching {run.process_pattern!r}\n", self._style("dim"))
                continue
            for proc in run.processes:
                head = f"  {run.name}: pid {proc.pid} up {fmt.uptime(proc.elapsed_s)}  "
                out.append(head)
                out.append(
                    fmt.clip(proc.command, max(10, width - len(head))) + "\n", self._style("dim")
                )

    def _gpu_lines(
        self, out: Text, host: str, gpu: GpuInfo, width: int, bar_w: int, alive: list[str]
    ) -> None:
        """A GPU's bars, then its temperature, power, owners and throttling (on the same
        line where the pane is wide enough, else on one of their own)."""
        start = len(out)
        util = None if gpu.util_pct is None else gpu.util_pct / 100
        mem = (
            None
            if gpu.mem_used_mib is None or not gpu.mem_total_mib
            else gpu.mem_used_mib / gpu.mem_total_mib
        )
        used = None if gpu.mem_used_mib is None else gpu.mem_used_mib * MiB
        total = None if gpu.mem_total_mib is None else gpu.mem_total_mib * MiB
        out.append(f"  {gpu.index:>2} {fmt.clip(gpu_name(gpu.name), 16):<16} util ")
        out.append(fmt.bar(util, bar_w), self._style("up"))
        out.append(f" {fmt.percent(util):>4}  mem ")
        out.append(fmt.bar(mem, bar_w), self._style("up"))
        out.append(f" {fmt.size_pair(used, total):<13}")
        self._jitter.append((start, len(out)))
        extra = Text(no_wrap=True)
        self._gpu_state(extra, gpu)
        self._gpu_owners(extra, host, gpu, alive)
        if gpu.throttle_reasons:
            extra.append("  throttled: " + ", ".join(gpu.throttle_reasons), self._style("warn"))
        if not extra.plain.strip():
            out.append("\n")
            return
        if width < ONE_LINE_MIN_WIDTH:
            out.append("\n     ")
        start = len(out)
        out.append_text(extra)
        self._jitter.append((start, len(out)))
        out.append("\n")

    def _gpu_state(self, out: Text, gpu: GpuInfo) -> None:
        """`64C  612/700W` (what nvidia-smi reported of it)."""
        if gpu.temp_c is not None:
            out.append(f" {gpu.temp_c:>3.0f}C")
        if gpu.power_w is not None:
            limit = f"/{gpu.power_limit_w:.0f}" if gpu.power_limit_w else ""
            out.append(f" {gpu.power_w:>4.0f}{limit}W")

    def _gpu_owners(self, out: Text, host: str, gpu: GpuInfo, alive: list[str]) -> None:
        """`slammed5 pid 4242 69.1 GiB` per process; an idle GPU while a run is alive."""
        parts = []
        for proc in gpu.processes:
            owner = owner_of(proc, host, self._runs, self._jobs)
            pid = "pid ?" if proc.pid is None else f"pid {proc.pid}"
            size = "" if proc.mem_mib is None else " " + fmt.size(proc.mem_mib * MiB)
            parts.append(f"{owner} {pid}{size}")
        if parts:
            out.append("  " + ", ".join(parts))
        if is_idle(gpu) and alive:
            held = " (held)" if gpu.processes else ""
            out.append(f"  idle{held} while {', '.join(alive)} is alive", self._style("warn"))
        elif not gpu.processes and gpu.uuid is not None and not is_idle(gpu):
            out.append("  no process listed", self._style("dim"))
