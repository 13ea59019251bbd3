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
counts as a crash, since the monkey never presses quit. At the end it also reads any
`console-errors.log` under the demo's directory (the console's crash log in its
state_dir; no file means nothing was logged) and counts a traceback there as a crash.
Finally it closes the console with Escape and `q` and expects exit status 0.

The sizes run one after the other (each its own tmux server, demo directory and ports),
so they do not share the cores. Each size replays the same seeded sequence of events
(timing on a loaded machine varies, so a replay is close, not exact).

On a crash: prints the seed, the event index, the last 30 events sent and the captured
pane, and exits 1. Otherwise one summary line per size (events, events/s, screens seen)
and exit 0.

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

CHECK_EVERY = 50  # events between two reads of the pane
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
    """Which screen the pane shows, roughly: a modal's title, else the footer's keys."""
    if "Keys (esc closes" in text:
        return "help"
    if "Relay: copy between" in text:
        return "relay form"
    if "─ Confirm " in text:
        return "confirm"
    if "Search for commands" in text:
        return "command palette"
    if "show lines containing" in text:
        return "log filter"
    lines = [line for line in text.splitlines() if line.strip()]
    footer = " ".join(lines[-1].split()) if lines else ""
    for prefix, name in [
        ("l Log q Quit", "main"),
        ("esc Back l Log", "log (full screen)"),
        ("esc Back p Progress", "progress"),
        ("esc Back q Quit", "detail/tasks"),
    ]:
        if footer.startswith(prefix):
            return name
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
    crash: str = ""  # why, when it crashed
    crash_index: int = -1
    last_events: list[str] = field(default_factory=list)
    pane: str = ""
    errors_log: str = ""  # a summary of console-errors.log
    exit_status: str = ""  # after q at the end


def kill_leftovers(base: Path) -> int:
    """End what the demo started and left (trainers and jobs run in their own sessions,
    so tmux's hangup does not reach them): every process whose command line names our
    own demo directory. Returns how many were found."""
    found = subprocess.run(["pgrep", "-f", str(base)], capture_output=True, text=True)
    pids = [int(p) for p in found.stdout.split() if int(p) != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while sig == signal.SIGTERM and time.monotonic() < deadline:
            if not any(Path(f"/proc/{p}").exists() for p in pids):
                return len(pids)
            time.sleep(0.2)
    return len(pids)


def read_errors_log(base: Path) -> tuple[str, str]:
    """(summary, first traceback) of every console-errors.log under `base`."""
    logs = sorted(base.rglob("console-errors.log"))
    if not logs:
        return "no console-errors.log (nothing logged)", ""
    parts, trace = [], ""
    for log in logs:
        text = log.read_text(errors="replace")
        parts.append(f"{log.relative_to(base)}: {len(text.splitlines())} lines")
        trace = trace or first_traceback(text)
    return "; ".join(parts), trace


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
    sent: deque[str] = deque(maxlen=LAST_EVENTS)

    def crashed(why: str, index: int) -> bool:
        result.crash, result.crash_index = why, index
        result.last_events = list(sent)
        result.pane = tmux.screen(history=True)
        return True

    def check(index: int) -> bool:
        """Read the pane; True when the console crashed."""
        text = tmux.screen()
        name = screen_name(text)
        result.screens[name] = result.screens.get(name, 0) + 1
        for line in text.splitlines():
            if EXCEPTION_LINE.match(line):
                result.exception_lines.add(line.strip(" │┃|")[:160])
        dead, status = tmux.dead()
        if dead:
            return crashed(f"the console exited (status {status})", index)
        if TRACEBACK in text or TRACEBACK in tmux.screen(history=True):
            return crashed("a traceback in the pane", index)
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
            if index % CHECK_EVERY == 0 and check(index):
                break
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
            print(f"[{size}] ended {left} process(es) the demo left behind", flush=True)
        result.errors_log, trace = read_errors_log(base)
        if trace and not result.crash:
            result.crash = "a traceback in console-errors.log"
            result.pane = trace
        elif trace:
            result.pane += "\n--- console-errors.log, first traceback ---\n" + trace


def report(r: Result) -> None:
    rate = r.events / r.seconds if r.seconds else 0.0
    screens = ", ".join(f"{name} x{n}" for name, n in sorted(r.screens.items()))
    print(
        f"[{r.size}] seed {r.seed}  {r.seconds / 60:.2f} min  {r.events} events  "
        f"{rate:.2f} events/s  crashes {1 if r.crash else 0}  exit on q: {r.exit_status or '-'}",
        flush=True,
    )
    print(f"[{r.size}] screens seen ({len(r.screens)}, per check): {screens}", flush=True)
    print(f"[{r.size}] {r.errors_log}", flush=True)
    if r.exception_lines:
        print(f"[{r.size}] exception-like lines seen on screen (not counted as crashes):")
        for line in sorted(r.exception_lines):
            print(f"    {line}")
    if r.crash:
        print(f"\n[{r.size}] CRASH: {r.crash}")
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
            if r.crash:
                break
    print("\nsummary:")
    for r in results:
        rate = r.events / r.seconds if r.seconds else 0.0
        print(
            f"  {r.size:>7}  seed {r.seed}  {r.seconds / 60:5.2f} min  {r.events:6d} events  "
            f"{rate:5.2f} events/s  {len(r.screens)} screens  crashes {1 if r.crash else 0}"
            f"  exit on q {r.exit_status or '-'}"
        )
    return 1 if any(r.crash for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
