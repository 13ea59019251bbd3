"""The one-line header: runs counted by state, hosts up (and down), the clock time of
the last refresh (the last host probe), and the config's name.

The counts come first and the config's name last: a long name (a deep path,
a long file name) is what gets cut at 80 columns, never the news that a
host is down.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from dflash_tui.monitor.views import HostView, RunView
from dflash_tui.ui import format as fmt
from dflash_tui.ui.guard import Guarded

ORDER = ("alive", "stalled", "dead", "unknown")


class HeaderBar(Guarded, Static):
    _shown: tuple[str, list] = ("", [])

    COMPONENT_CLASSES = {
        "header--title",
        "header--alive",
        "header--stalled",
        "header--dead",
        "header--unknown",
    }

    _args: tuple | None = None

    def on_resize(self) -> None:
        if self._args is not None:
            self.update_header(*self._args)  # the title shows only where there is room

    def update_header(
        self,
        config_name: str,
        refreshed_at: float | None,
        runs: Sequence[RunView],
        hosts: Sequence[HostView],
    ) -> None:
        self._args = (config_name, refreshed_at, runs, hosts)

        def style(name: str) -> Style:
            return self.get_component_rich_style(f"header--{name}", partial=True)

        out = Text(no_wrap=True, overflow="ellipsis")
        if self.size.width >= 100:
            out.append(" dflash-tui ", style("title"))
        out.append(" ")
        counts = Counter(r.state.value for r in runs)
        for state in ORDER:
            if counts.get(state):
                out.append(f"{counts[state]} {state}", style(state))
                out.append(" ")
        up = sum(1 for h in hosts if h.reachable)
        down = sum(1 for h in hosts if h.reachable is False)
        out.append(f" hosts {up}/{len(hosts)} up")
        if down:
            out.append(f" {down} down", style("dead"))
        # The last refresh to the minute: to the second, the header was a frame of its own
        # every refresh_s; a probe that is late shows its age in the hosts pane.
        out.append(f"  {fmt.clock(refreshed_at, seconds=False)}  ")
        room = max(12, (self.size.width or 80) - out.cell_len - 1)
        # A path is cut at its start: the file's own name is the part that tells configs apart.
        out.append(config_name if len(config_name) <= room else ".." + config_name[2 - room :])
        if out.plain != self._shown[0] or out.spans != self._shown[1]:
            self._shown = (out.plain, list(out.spans))
            self.update(out, layout=False)  # one fixed line: no layout pass
