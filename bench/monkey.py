"""Monkey soak: the real console on the demo cluster in tmux, fed seeded random keys for minutes.

The UI tests drive one path at a time, with each wait chosen; an operator does not.
This opens `dflash-tui demo` (the real console on the embedded demo cluster) in a
private tmux server (`tmux -L SOCKET -f /dev/null`, no COLUMNS/LINES/TMUX in its
environment, `remain-on-exit on` so a dead console's last screen and exit status stay
readable) at each chosen size, waits for the demo's runs to show, then for `--minutes`
sends seeded random events: every key of the project's action table
(`dflash_tui.keymap.ACTIONS`, the quit action and ctrl+c / ctrl+q left out), editing and
moving keys (Enter, Escape, Tab, BTab, arrows, Backspace, ...), and typed text (paths such
as `ckpt/s`, `/tmp/`, the demo's host names with a colon, run names, y / n), 0-300 ms
apart with an occasional 1-2 s pause so late results (completions, probes, evals) land.

Every 50 events, and at the end, it reads the pane (`capture-pane`, with history) for a
Python traceback and asks tmux whether the console is still alive; an exit of any kind
counts as a crash, since the monkey never presses quit. It also reads the console's
`console-errors.log` (in its state_dir, `DIR/demo/state/`; no file means nothing was
logged): the console catches an unexpected exception, logs its traceback there and
carries on (ui/guard.py), so an "unexpected error" entry is a failure too, though
the console stays up; "dropped a late result" entries (a result for a widget that has
closed) are counted, not failures. The first failure of either kind ends the soak.
Finally it closes the console with Escape and `q` and expects exit status 0, and
reports every `console-errors.log` under the directory (line count, first traceback).

The sizes run one after the other (each its own tmux server, demo directory and ports),
so they do not share the cores. Each size replays the same seeded sequence of events
(timing on a loaded machine varies, so a replay is close, not exact).

On a failure: prints the seed, the event index, the last 30 events sent and the captured
pane (or the logged traceback), goes on with the next size, and exits 1. Otherwise one
summary line per size (events, events/s, screens seen, failures 0) and exit 0.

    .venv/bin/python bench/monkey.py                              # 2 minutes, 80x24 then 160x48
    .venv/bin/python bench/monkey.py --minutes 1 --sizes 80x24 --seed 1
    .venv/bin/python bench/monkey.py --minutes 30 --dir /tmp/soak  # keep the demo's files
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10, as the project's config loader does
    import tomli as tomllib  # type: ignore[no-redef]

from dflash_tui.keymap import ACTIONS, normalize_key  # noqa: E402
from tests.testbed import free_port_run  # noqa: E402

ERROR_LOG = "console-errors.log"  # dflash_tui.ui.guard.ERROR_LOG_NAME, under state_dir
# Each entry of that log starts with a UTC stamp.
LOG_ENTRY = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ", re.MULTILINE)
CHECK_EVERY = 50  # events between two checks for a crash
LOOK_EVERY = 10  # events between two looks at which screen shows
LAST_EVENTS = 30  # events shown with a crash
START_TIMEOUT_S = 120.0  # the demo's hosts, trainers and first refresh
QUIT_KEYS = {"q", "ctrl+c", "ctrl+q"}  # plus every key of the quit action
TRACEBACK = "Traceback (most recent call last)"
# A Python exception line, also inside Textual's boxed traceback ("│ NoMatches: ...").
EXCEPTION_LINE = re.compile(r"^[\s│┃|]*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|NoMatches)):")

# Textual's key names that tmux's send-keys spells otherwise.
TMUX_NAMES = {
    "enter": "Enter",
    "escape": "Escape",
    "tab": "Tab",
    "shift+tab": "BTab",
    "space": "Space",
    "backspace": "BSpace",
    "delete": "DC",
    "insert": "IC",
    "home": "Home",
    "end": "End",
    "pageup": "PPage",
    "pagedown": "NPage",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
}
# Textual's names of punctuation ("question_mark", "slash") back to the character.
PUNCTUATION = {normalize_key(c): c for c in string.punctuation}
# Keys that edit and move, mixed in on their own.
MOVES = ["Enter", "Escape", "Tab", "BTab", "Up", "Down", "Left", "Right", "BSpace", "BSpace",
         "PPage", "NPage", "Home", "End", "Space"]  # fmt: skip
TEXT = ["ckpt/s", "/tmp/", "/", "step-", "models/", "workspace/", "results/", "..", "~/", "y", "n",
        "a", "zz", " ", "*", "0"]  # fmt: skip


@dataclass(frozen=True)
class Event:
    """One thing sent: a tmux key name, or literal text (`send-keys -l`)."""

    kind: str  # "key" (an action's key), "move" or "text"
    value: str  # the tmux key name, or the text
    literal: bool
    what: str  # where it came from: the action id, or "move" / "text"

    def __str__(self) -> str:
        return f"{self.kind:<4} {self.value!r:<16} {self.what}"


def tmux_key(key: str) -> tuple[str, bool] | None:
    """A Textual key name as tmux send-keys takes it: (name, literal); None if unknown."""
    if len(key) == 1:
        return key, True
    if key in PUNCTUATION:
        return PUNCTUATION[key], True
    if key in TMUX_NAMES:
        return TMUX_NAMES[key], False
    if re.fullmatch(r"f\d{1,2}", key):
        return key.upper(), False
    if m := re.fullmatch(r"ctrl\+([a-z])", key):
        return f"C-{m.group(1)}", False
    return None


def action_keys() -> list[Event]:
    """Every binding of the action table as an event, the quit keys left out."""
    quit_keys = set(QUIT_KEYS)
    for a in ACTIONS:
        if a.id == "app.quit":
            quit_keys |= {normalize_key(k) for k in a.keys.split(",")}
    events = []
    for a in ACTIONS:
        for key in (normalize_key(k) for k in a.keys.split(",")):
            if key in quit_keys:
                continue
            sent = tmux_key(key)
            if sent is None:
                print(f"note: no tmux name for {key!r} ({a.id}); left out", flush=True)
                continue
            events.append(Event("key", sent[0], sent[1], a.id))
    return events


def demo_words(config: Path) -> list[str]:
    """Host names (with a colon and a path start) and run names from the demo's hosts.toml."""
    try:
        data = tomllib.loads(config.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return ["trainbox:", "evalbox:", "storage:"]
    words = []
    for host in data.get("hosts", {}):
        words += [f"{host}:", f"{host}:models/", f"{host}:workspace/", host[:3]]
    words += [r["name"] for r in data.get("runs", []) if "name" in r]
    return words


class Monkey:
    """The seeded stream of events."""

    def __init__(self, seed: int, keys: list[Event], words: list[str]) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.texts = TEXT + words

    def next(self) -> tuple[Event, float]:
        """An event and the pause after it (seconds)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.45:
            event = rng.choice(self.keys)
        elif roll < 0.70:
            event = Event("move", rng.choice(MOVES), False, "move")
        else:
            event = Event("text", rng.choice(self.texts), True, "text")
        pause = rng.uniform(1.0, 2.0) if rng.random() < 0.03 else rng.uniform(0.0, 0.3)
        return event, pause


class Tmux:
    """A private tmux server (its own socket, no user config) holding the console's pane."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self.env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}

    def __call__(self, *args: str, check: bool = False) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=15,
            env=self.env,
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def send(self, event: Event) -> None:
        if event.literal:
            self("send-keys", "-t", "monkey", "-l", event.value)
        else:
            self("send-keys", "-t", "monkey", event.value)

    def screen(self, history: bool = False) -> str:
        extra = ["-S", "-"] if history else []
        return self("capture-pane", "-p", "-t", "monkey", *extra)

    def dead(self) -> tuple[bool, str]:
        """Whether the console's pane is dead, and its exit status ('' while alive)."""
        out = self("list-panes", "-t", "monkey", "-F", "#{pane_dead} #{pane_dead_status}")
        if not out.strip():
            return True, "?(no pane)"
        flag, _, status = out.splitlines()[0].partition(" ")
        return flag == "1", status.strip()


def screen_name(text: str) -> str:
    """Which screen the pane shows, roughly: a modal's title, else what the footer offers."""
    for marker, name in [
        ("Keys (esc closes", "help"),
        ("Relay: copy between", "relay form"),
        ("─ Confirm ", "confirm"),
        ("Search for commands", "command palette"),
        ("show lines containing", "log filter"),
    ]:
        if marker in text:
            return name
    lines = [line for line in text.splitlines() if line.strip()]
    footers = [line for line in lines[-4:] if "Keys" in line or "Commands" in line]
    if not footers:  # a toast or a modal covers the bottom line
        return "other (no footer on screen)"
    footer = " ".join(footers[-1].split())
    if "esc Back" in footer:
        if "Follow" in footer or "Filter" in footer:
            return "log (full screen)"
        if "Progress" in footer:
            return "progress"
        return "detail/tasks"
    if "q Quit" in footer:
        return "main"
    if "Keys" in footer:
        return "main, a field focused"
    return f"other: {footer[:40]!r}"


def first_traceback(text: str) -> str:
    """The first traceback in `text`, to its exception line (or 40 lines)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if TRACEBACK in line:
            for j in range(i + 1, min(len(lines), i + 400)):
                if EXCEPTION_LINE.match(lines[j]):
                    return "\n".join(lines[i : j + 1])
            return "\n".join(lines[i : i + 40])
    return ""


@dataclass
class Result:
    size: str
    seed: int
    minutes: float
    events: int = 0
    seconds: float = 0.0
    screens: dict[str, int] = field(default_factory=dict)
    exception_lines: set[str] = field(default_factory=set)
    crash: str = ""  # why, when it crashed or logged an unexpected error
    kind: str = ""  # "crash" (a traceback on screen, an exit) or "logged error"
    crash_index: int = -1
    last_events: list[str] = field(default_factory=list)
    pane: str = ""
    errors_log: str = ""  # a summary of every console-errors.log under the directory
    logged_errors: int = 0  # "unexpected error" entries
    late_dropped: int = 0  # "dropped a late result" entries
    exit_status: str = ""  # after q at the end


def kill_leftovers(base: Path) -> list[str]:
    """End what the demo started and left (trainers and eval jobs run in their own
    sessions, so tmux's hangup does not reach them): every process whose command line
    names our own demo directory. Returns their command lines."""
    found = subprocess.run(["pgrep", "-af", str(base)], capture_output=True, text=True)
    procs = [line.split(" ", 1) for line in found.stdout.splitlines() if line.strip()]
    pids = [int(p[0]) for p in procs if int(p[0]) != os.getpid()]
    commands = [p[1] if len(p) > 1 else "" for p in procs if int(p[0]) != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while sig == signal.SIGTERM and time.monotonic() < deadline:
            if not any(Path(f"/proc/{p}").exists() for p in pids):
                return commands
            time.sleep(0.2)
    return commands


def log_entries(text: str) -> tuple[list[str], int]:
    """The unexpected-error entries of a console-errors.log, and how many late results
    it dropped."""
    starts = [m.start() for m in LOG_ENTRY.finditer(text)] or ([0] if text.strip() else [])
    entries = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    dropped = sum(1 for e in entries if " dropped a late result" in e.split("\n", 1)[0])
    errors = [e for e in entries if " dropped a late result" not in e.split("\n", 1)[0]]
    return errors, dropped


def read_error_logs(base: Path) -> tuple[str, list[str], int]:
    """Every console-errors.log under `base` (and its .1): a summary, the unexpected-error
    entries, the late results dropped."""
    logs = sorted(base.rglob(ERROR_LOG + "*"))
    if not logs:
        return f"no {ERROR_LOG} (nothing logged)", [], 0
    parts, errors, dropped = [], [], 0
    for log in logs:
        text = log.read_text(errors="replace")
        e, d = log_entries(text)
        errors += e
        dropped += d
        parts.append(
            f"{log.relative_to(base)}: {len(text.splitlines())} lines, "
            f"{len(e)} unexpected errors, {d} late results dropped"
        )
    return "; ".join(parts), errors, dropped


def soak(size: str, seed: int, minutes: float, base: Path) -> Result:
    """One size: start the demo in tmux, send events for `minutes`, check, close."""
    width, height = (int(n) for n in size.lower().split("x"))
    result = Result(size, seed, minutes)
    base.mkdir(parents=True, exist_ok=True)
    demo_dir = base / "demo"
    port = free_port_run(3)  # the demo serves on port, port + 1 and port + 2
    tmux = Tmux(f"dflash-monkey-{os.getpid()}-{size}")
    console = (
        f"env -u COLUMNS -u LINES TERM=tmux-256color {ROOT / '.venv' / 'bin' / 'dflash-tui'} "
        f"demo --dir {demo_dir} --port-base {port}"
    )
    state_log = demo_dir / "state" / ERROR_LOG  # the demo's hosts.toml: state_dir = "state"
    sent: deque[str] = deque(maxlen=LAST_EVENTS)

    def crashed(why: str, index: int, kind: str = "crash") -> bool:
        result.crash, result.crash_index, result.kind = why, index, kind
        result.last_events = list(sent)
        result.pane = tmux.screen(history=True)
        return True

    def look() -> str:
        """Read the pane; note its screen and any exception-like line."""
        text = tmux.screen()
        name = screen_name(text)
        result.screens[name] = result.screens.get(name, 0) + 1
        for line in text.splitlines():
            if EXCEPTION_LINE.match(line):
                result.exception_lines.add(line.strip(" │┃|")[:160])
        return text

    def check(index: int) -> bool:
        """Read the pane; True when the console crashed."""
        text = look()
        dead, status = tmux.dead()
        if dead:
            return crashed(f"the console exited (status {status})", index)
        if TRACEBACK in text or TRACEBACK in tmux.screen(history=True):
            return crashed("a traceback in the pane", index)
        errors, result.late_dropped = [], 0
        for log in (state_log, state_log.with_name(ERROR_LOG + ".1")):
            with contextlib.suppress(OSError):
                e, d = log_entries(log.read_text(errors="replace"))
                errors += e
                result.late_dropped += d
        result.logged_errors = len(errors)
        if errors:
            why = f"an unexpected error in {ERROR_LOG} (the console carried on)"
            crashed(why, index, "logged error")
            result.pane += f"\n--- {state_log}, first entry ---\n" + errors[0]
            return True
        return False

    try:
        # remain-on-exit is set before the pane's command starts, so no exit is missed.
        tmux("start-server", ";", "set-option", "-g", "exit-empty", "off", ";",
             "set-option", "-g", "remain-on-exit", "on", ";",
             "set-option", "-g", "history-limit", "5000", ";",
             "new-session", "-d", "-s", "monkey", "-x", str(width), "-y", str(height),
             console, check=True)  # fmt: skip
        print(f"[{size}] demo on ports {port}-{port + 2}, files in {demo_dir}", flush=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            text = tmux.screen()
            if "slammed5" in text and "alive" in text:
                break
            if tmux.dead()[0] or TRACEBACK in text:
                crashed("the console died while starting", 0)
                return result
            if time.monotonic() > deadline:
                crashed(f"the runs did not show within {START_TIMEOUT_S:.0f}s", 0)
                return result
            time.sleep(0.5)

        monkey = Monkey(seed, action_keys(), demo_words(demo_dir / "hosts.toml"))
        began = time.monotonic()
        end = began + minutes * 60
        index = 0
        while time.monotonic() < end:
            event, pause = monkey.next()
            index += 1
            tmux.send(event)
            sent.append(f"#{index:<6} +{time.monotonic() - began:7.2f}s  {event}")
            time.sleep(pause)
            if index % CHECK_EVERY == 0:
                if check(index):
                    break
            elif index % LOOK_EVERY == 0:
                look()
        result.events = index
        result.seconds = time.monotonic() - began
        if result.crash or check(index):
            return result

        # Close: out of any modal or input, then quit; the console must exit 0.
        for _ in range(3):
            for key in ("Escape", "Escape", "Escape"):
                tmux("send-keys", "-t", "monkey", key)
                time.sleep(0.4)
            tmux("send-keys", "-t", "monkey", "q")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not tmux.dead()[0]:
                time.sleep(0.3)
            if tmux.dead()[0]:
                break
        dead, status = tmux.dead()
        result.exit_status = status if dead else "still running after 3 tries of q"
        text = tmux.screen(history=True)
        if not dead or status != "0" or TRACEBACK in text:
            crashed(f"closing with q: exit status {result.exit_status}", index)
        return result
    finally:
        with contextlib.suppress(Exception):
            tmux("kill-server")
        left = kill_leftovers(demo_dir)
        if left:
            print(f"[{size}] ended {len(left)} process(es) left running by the demo:", flush=True)
            for command in left:
                print(f"    {command[:150]}", flush=True)
        result.errors_log, errors, result.late_dropped = read_error_logs(base)
        result.logged_errors = len(errors)
        if errors and not result.crash:
            result.crash, result.kind = f"an unexpected error in {ERROR_LOG}", "logged error"
            result.crash_index = result.events
            result.last_events = list(sent)
            result.pane = errors[0]


def summary_line(r: Result) -> str:
    """The summary line of one size."""
    rate = r.events / r.seconds if r.seconds else 0.0
    return (
        f"{r.size:>7}  seed {r.seed}  {r.seconds / 60:5.2f} min  {r.events:6d} events  "
        f"{rate:5.2f} events/s  {len(r.screens)} screens  "
        f"crashes {1 if r.kind == 'crash' else 0}  unexpected errors logged {r.logged_errors}  "
        f"late results dropped {r.late_dropped}  exit on q {r.exit_status or '-'}"
    )


def report(r: Result) -> None:
    screens = ", ".join(f"{name} x{n}" for name, n in sorted(r.screens.items()))
    print(f"[{r.size}] {summary_line(r).strip()}", flush=True)
    print(f"[{r.size}] screens seen ({len(r.screens)}; looks per screen): {screens}", flush=True)
    print(f"[{r.size}] {r.errors_log}", flush=True)
    if r.exception_lines:
        print(f"[{r.size}] exception-like lines seen on screen (not counted as crashes):")
        for line in sorted(r.exception_lines):
            print(f"    {line}")
    if r.crash:
        print(f"\n[{r.size}] {r.kind.upper()}: {r.crash}")
        print(
            f"  seed {r.seed}, at event #{r.crash_index} (replay: --seed {r.seed} --sizes {r.size})"
        )
        print(f"  the last {len(r.last_events)} events sent:")
        for line in r.last_events:
            print(f"    {line}")
        print("  the pane (with history):")
        print("\n".join("    " + line for line in r.pane.rstrip().splitlines()))
        print(flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="of events, per size")
    parser.add_argument("--sizes", default="80x24,160x48", help="comma-separated WxH")
    parser.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    parser.add_argument("--dir", type=Path, default=None, help="keep the demo's files here")
    args = parser.parse_args(argv)
    if shutil.which("tmux") is None:
        parser.error("tmux is not installed")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if not re.fullmatch(r"\d+x\d+", s.lower()):
            parser.error(f"size {s!r} is not WxH")
    print(f"monkey: seed {seed}, {args.minutes:g} min per size, sizes {' '.join(sizes)}")
    print(f"monkey: {len(action_keys())} action keys from dflash_tui.keymap.ACTIONS", flush=True)

    results = []
    with contextlib.ExitStack() as stack:
        root = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="monkey-")))
        for size in sizes:
            r = soak(size, seed, args.minutes, root / size)
            results.append(r)
            report(r)
    print("\nsummary:")
    for r in results:
        print(f"  {summary_line(r)}")
    return 1 if any(r.crash for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
