"""What a notification says: one line with host, run and reason, then a few detail lines.

```
RUN DEAD | host ct200 | run slammed5 | no train_dflash_pipeline.py process
step 41200/70000, loss 2.31, acc 0.41
log silent for 6m
```

The title (shown by services that have one: email subjects, ntfy titles) is
`dflash-tui: <label> <subject>`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dflash_tui.core import notify_settings as ev

MAX_DETAILS = 6
MAX_LINE = 200

# event -> (label when it starts or happens, label when it ends)
_LABELS = {
    ev.RUN_DEAD: ("RUN DEAD", "RUN RECOVERED"),
    ev.RUN_STALLED: ("RUN STALLED", "RUN RECOVERED"),
    ev.HOST_DOWN: ("HOST DOWN", "HOST RECOVERED"),
    ev.ACCEPTANCE_DROP: ("ACCEPTANCE DROP", "ACCEPTANCE RECOVERED"),
    ev.DRAFTER_COLLAPSE: ("DRAFTER COLLAPSED", "DRAFTER RECOVERED"),
    ev.EVAL_FINISHED: ("EVAL FINISHED", "EVAL FINISHED"),
    ev.EVAL_FAILED: ("EVAL FAILED", "EVAL FAILED"),
    ev.RELAY_FINISHED: ("RELAY FINISHED", "RELAY FINISHED"),
    ev.RELAY_FAILED: ("RELAY FAILED", "RELAY FAILED"),
    ev.SWEEP_FINISHED: ("SWEEP FINISHED", "SWEEP FINISHED"),
}
# which events are conditions (they start and end) and which are severe
CONDITIONS = frozenset(
    {ev.RUN_DEAD, ev.RUN_STALLED, ev.HOST_DOWN, ev.ACCEPTANCE_DROP, ev.DRAFTER_COLLAPSE}
)
FAILURES = frozenset(
    {ev.RUN_DEAD, ev.HOST_DOWN, ev.DRAFTER_COLLAPSE, ev.EVAL_FAILED, ev.RELAY_FAILED}
)
WARNINGS = frozenset({ev.RUN_STALLED, ev.ACCEPTANCE_DROP})


@dataclass(frozen=True)
class Notice:
    """One thing to tell an operator. `recovery` marks the end of a condition."""

    event: str
    reason: str
    host: str | None = None
    run: str | None = None
    details: tuple[str, ...] = field(default_factory=tuple)
    recovery: bool = False

    @property
    def label(self) -> str:
        start, end = _LABELS.get(self.event, (self.event.upper(), self.event.upper()))
        return end if self.recovery else start

    @property
    def level(self) -> str:
        """apprise's notify type: failure, warning, success or info."""
        if self.recovery:
            return "success"
        if self.event in FAILURES:
            return "failure"
        if self.event in WARNINGS:
            return "warning"
        return "success" if self.event.endswith("_finished") else "info"

    def headline(self) -> str:
        parts = [self.label]
        if self.host:
            parts.append(f"host {self.host}")
        if self.run:
            parts.append(f"run {self.run}")
        parts.append(self.reason)
        return _one_line(" | ".join(parts))

    def title(self) -> str:
        subject = self.run or self.host or ""
        return _one_line(f"dflash-tui: {self.label.lower()} {subject}".rstrip())

    def body(self) -> str:
        lines = [self.headline()]
        lines.extend(_one_line(d) for d in self.details[:MAX_DETAILS] if d.strip())
        return "\n".join(lines)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE else flat[: MAX_LINE - 1] + "…"
