"""Monkey soak: the real console on the demo cluster in tmux, fed seeded random keys for minutes.

The UI tests drive one path at a time, with each wait chosen; an operator does not.
This opens `dflash-tui demo` (the real console on the embedded demo cluster) in a
private tmux server (`tmux -L SOCKET -f /dev/null`, no COLUMNS/LINES/TMUX in its
environment, `remain-on-exit on` so a dead console's last screen and exit status stay
readable) at each chosen size, waits for the demo's runs to show, then for `--minutes`
sends seeded random events: every key of the project's action table
(`dflash_tui.console.keymap.ACTIONS`, the quit action and ctrl+c / ctrl+q left out), editing and
moving keys (Enter, Escape, Tab, BTab, arrows, Backspace, ...), and typed text (paths such
as `ckpt/s`, `/tmp/`, the demo's host names with a colon, run names, y / n), 0-300 ms
apart with an occasional 1-2 s pause so late results (completions, probes, evals) land.

Every 50 events, and at the end, it asks tmux whether the console is still alive and
still drawing (the alternate screen), and reads the pane (`capture-pane`, with history)
for a Python traceback printed outside the console's screen (Textual prints a crash's
there; a traceback inside the console is the demo's dead run's log). An exit of any
kind counts as a crash, since the monkey never presses quit. It also reads the console's
`console-errors.log` (in its state_dir, `DIR/demo/state/`; no file means nothing was
logged): the console catches an unexpected exception, logs its traceback there and
carries on (ui/guard.py), so an "unexpected error" entry is a failure too, though
the console stays up; "dropped a late result" entries (a result for a widget that has
closed) are counted, not failures. The first failure of either kind ends the soak.
Finally it closes the console with Escape and `q` and expects exit status 0 (the
pane's shell writes it to a file), and reports every `console-errors.log` under the
directory (lines, unexpected errors, late results dropped).

The console is the real one with two guard rails. The monkey types paths and presses
Start in the relay form, so relays are carried out only between the demo hosts' own
folders (`host:relative/path`: no local path, no `/` or `~` at the path's start, no
`..`); any other relay fails at once with a TransferError, as a bad path would. And
the palette's Quit (C-p, a few arrows, Enter) is held, not obeyed, until the
soak's own `q` at the end; held quits are counted. For both the pane runs this script
in its `--as-console` mode (it wraps `ConsoleSession.relay` and `DflashApp.action_quit`,
then runs `dflash-tui demo` in the same process) instead of the `dflash-tui` program,
in a scratch folder as its working directory (the palette's screenshot lands there).

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
import shlex
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

from dflash_tui.console.keymap import ACTIONS, normalize_key  # noqa: E402
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
    """One thing sent: tmux key names and literal text (`send-keys -l`), in one go."""

    kind: str  # "key" (an action's key), "move", "text" or "form"
    parts: tuple[tuple[str, bool], ...]  # (tmux key name or text, literal)
    what: str  # where it came from: the action id, or the kind

    def __str__(self) -> str:
        sent = " ".join(repr(v) for v, _ in self.parts)
        return f"{self.kind:<4} {sent:<16} {self.what}"


def safe_relay_word(word: str) -> bool:
    """A demo host's own folder: `host:relative/path`, never a local or outside path."""
    from dflash_tui.demo.cluster import HOSTS

    host, colon, path = word.partition(":")
    return (
        bool(colon)
        and host in HOSTS
        and not path.startswith(("/", "~"))
        and ".." not in path.split("/")
        and not any(c.isspace() for c in path)
    )


def as_console(words: list[str]) -> int:
    """`--as-console DEMO-ARGS...`: `dflash-tui demo ...` in this process, with relays
    outside the demo hosts' folders refused, and quitting held while the file named
    by $DFLASH_MONKEY_HOLD_QUIT exists (each held quit adds a line to FILE.held)."""
    from dflash_tui.cli import main as cli_main
    from dflash_tui.console.session import ConsoleSession
    from dflash_tui.transfer.errors import TransferError
    from dflash_tui.ui.app import DflashApp

    real_relay = ConsoleSession.relay
    real_quit = DflashApp.action_quit
    hold = Path(os.environ.get("DFLASH_MONKEY_HOLD_QUIT", "/nonexistent/hold"))

    async def relay(self: ConsoleSession, src: str, dst: str) -> str:
        if not (safe_relay_word(src) and safe_relay_word(dst)):
            raise TransferError(f"monkey: relay {src} -> {dst} not carried out (outside the demo)")
        return await real_relay(self, src, dst)

    def action_quit(self: DflashApp) -> None:
        if hold.exists():
            with hold.with_name(hold.name + ".held").open("a") as held:
                held.write("quit\n")
            self.notify("monkey: quit held")
            return
        real_quit(self)

    ConsoleSession.relay = relay  # type: ignore[method-assign]
    DflashApp.action_quit = action_quit  # type: ignore[method-assign]
    return cli_main(["demo", *words])


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
            events.append(Event("key", (sent,), a.id))
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
    """The seeded stream of events.

    45% an action's key, 22% a moving or editing key, 28% typed text, 5% a "form":
    the relay form opened, a path typed in one of its fields and the form closed at
    once (Escape), all in one tmux command, so the completion's answer arrives after
    its form has gone."""

    def __init__(self, seed: int, keys: list[Event], words: list[str]) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.texts = TEXT + words
        self.paths = [w for w in words if ":" in w] or ["storage:"]
        self.relay_keys = [e.parts[0] for e in keys if e.what == "transfers.relay"]

    def next(self) -> tuple[Event, float]:
        """An event and the pause after it (seconds)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.45:
            event = rng.choice(self.keys)
        elif roll < 0.67:
            event = Event("move", ((rng.choice(MOVES), False),), "move")
        elif roll < 0.95 or not self.relay_keys:
            event = Event("text", ((rng.choice(self.texts), True),), "text")
        else:
            field = [] if rng.random() < 0.5 else [("Tab", False)]  # source or destination
            path = rng.choice(self.paths) + rng.choice(["", "m", "w", "mo", "wor"])
            parts = (rng.choice(self.relay_keys), *field, (path, True), ("Escape", False))
            event = Event("form", parts, "relay form, closed at once")
        pause = rng.uniform(1.0, 2.0) if rng.random() < 0.03 else rng.uniform(0.0, 0.3)
        return event, pause


class Tmux:
    """A private tmux server (its own socket, no user config) holding the console's pane."""

    def __init__(self, socket: str, rc_file: Path | None = None) -> None:
        self.socket = socket
        self.rc_file = rc_file  # where the pane's shell writes the console's exit status
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
        """Every part of the event in one tmux command (one after the other, at once)."""
        args: list[str] = []
        for value, literal in event.parts:
            args += [";"] if args else []
            args += ["send-keys", "-t", "monkey", *(["-l"] if literal else []), value]
        self(*args)

    def screen(self, history: bool = False) -> str:
        extra = ["-S", "-"] if history else []
        return self("capture-pane", "-p", "-t", "monkey", *extra)

    def on_alternate_screen(self) -> bool:
        """Whether the pane shows the alternate screen: the console is drawing."""
        return self("display-message", "-p", "-t", "monkey", "#{alternate_on}").strip() == "1"

    def printed_traceback(self) -> bool:
        """A traceback printed to the terminal, outside the console's own screen.

        While the console draws (the alternate screen) a traceback on screen is what
        it shows, e.g. the demo's dead run's log ends in one; Textual prints a crash's
        traceback after it has left that screen, to the normal one and its history."""
        return not self.on_alternate_screen() and TRACEBACK in self.screen(history=True)

    def dead(self, wait_s: float = 10.0) -> tuple[bool, str]:
        """Whether the console's pane is dead, and how the console ended ('' while
        alive): its exit status or "signal N", as the pane's shell wrote it to
        `rc_file` after the console (tmux's own record is the fallback)."""
        fmt = "#{pane_dead} #{pane_dead_status} #{pane_dead_signal}"
        out = self("list-panes", "-t", "monkey", "-F", fmt)
        if not out.strip():
            return True, "unknown: the tmux server or pane is gone"
        flag, status, signal_no = [*out.splitlines()[0].split(" "), "", ""][:3]
        if flag != "1":
            return False, ""
        deadline = time.monotonic() + wait_s
        while self.rc_file is not None and time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                rc = int(self.rc_file.read_text())
                return True, str(rc) if rc < 128 else f"signal {rc - 128} (status {rc})"
            time.sleep(0.2)
        how = status or (f"signal {signal_no}" if signal_no else "unknown")
        return True, f"{how} (the pane's shell wrote no status)"


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
    load: list[float] = field(default_factory=list)  # 1-minute load average, start and end
    quits_held: int = 0  # quits asked for during the soak (the palette's Quit), not obeyed


def process_info(pid: str) -> str:
    """What /proc says of a process that should have exited: state, wait channel,
    threads by name, children."""
    proc = Path(f"/proc/{pid}")
    if not pid.isdigit() or not proc.exists():
        return f"pid {pid}: gone"
    lines = [f"pid {pid}: " + " ".join((proc / "cmdline").read_text().split("\0"))[:200]]
    with contextlib.suppress(OSError):
        status = dict(
            x.split(":\t", 1) for x in (proc / "status").read_text().splitlines() if ":\t" in x
        )
        parent = Path(f"/proc/{status.get('PPid', '?')}/cmdline")
        parent_cmd = " ".join(parent.read_text().split("\0"))[:80] if parent.exists() else "?"
        lines.append(
            f"  state {status.get('State', '?')}, wchan {(proc / 'wchan').read_text()}, "
            f"parent {status.get('PPid', '?')} ({parent_cmd})"
        )
        names = sorted((t / "comm").read_text().strip() for t in (proc / "task").iterdir())
        lines.append(f"  {len(names)} threads: {', '.join(names)}")
    children = subprocess.run(["ps", "-o", "pid,stat,args", "--ppid", pid], capture_output=True,
                              text=True)  # fmt: skip
    lines += ["  children:", *("    " + c[:150] for c in children.stdout.splitlines()[1:])]
    return "\n".join(lines)


def kill_leftovers(base: Path) -> list[str]:
    """End what the demo started and left (trainers and eval jobs run in their own
    sessions, so tmux's hangup does not reach them): every process whose command line
    names our own demo directory. Returns their command lines."""
    mine = {os.getpid(), os.getppid()}
    found: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        with contextlib.suppress(OSError):
            command = " ".join((proc / "cmdline").read_text(errors="replace").split("\0"))
            if str(base) in command:
                found[int(proc.name)] = command.strip()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while sig == signal.SIGTERM and time.monotonic() < deadline:
            if not any(Path(f"/proc/{p}").exists() for p in found):
                return list(found.values())
            time.sleep(0.2)
    return list(found.values())


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
    rc_file = base / "console.rc"
    rc_file.unlink(missing_ok=True)  # from an earlier soak in the same --dir
    tmux = Tmux(f"dflash-monkey-{os.getpid()}-{size}", rc_file)
    scratch = base / "cwd"  # the console's working directory
    scratch.mkdir(exist_ok=True)
    hold = base / "hold-quit"  # while it exists, the console holds a quit (the palette's)
    hold.write_text("")
    hold.with_name(hold.name + ".held").unlink(missing_ok=True)
    console = shlex.join(
        ["env", "-u", "COLUMNS", "-u", "LINES", "TERM=tmux-256color",
         f"DFLASH_MONKEY_HOLD_QUIT={hold}", sys.executable,
         str(Path(__file__).resolve()), "--as-console", "--dir", str(demo_dir),
         "--port-base", str(port)]
    )  # fmt: skip
    # The pane's shell records the exit status: tmux's own record depends on tmux
    # reaping the process, and a console that had exited was seen left a zombie for 30 s.
    console += f"; echo $? > {shlex.quote(str(rc_file))}"
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
        look()
        dead, status = tmux.dead()
        if dead:
            return crashed(f"the console exited ({status})", index)
        if tmux.printed_traceback():
            return crashed("a traceback printed in the pane", index)
        if not tmux.on_alternate_screen():
            time.sleep(5)  # a redraw, or a console on its way out: ask again
            dead, status = tmux.dead()
            if dead:
                return crashed(f"the console exited ({status})", index)
            if not tmux.on_alternate_screen():
                return crashed("the console left its screen but has not exited", index)
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
             "-c", str(scratch), console, check=True)  # fmt: skip
        result.load = [os.getloadavg()[0]]
        print(f"[{size}] demo on ports {port}-{port + 2}, files in {demo_dir}", flush=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            text = tmux.screen()
            if "slammed5" in text and "alive" in text:
                break
            if tmux.dead()[0] or tmux.printed_traceback():
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
        result.load.append(os.getloadavg()[0])
        if result.crash or check(index):
            return result

        # Close: out of any modal or input, then quit; the console must exit 0.
        hold.unlink()
        for _ in range(3):
            for key in ("Escape", "Escape", "Escape"):
                tmux("send-keys", "-t", "monkey", key)
                time.sleep(0.4)
            tmux("send-keys", "-t", "monkey", "q")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not tmux.dead(wait_s=0)[0]:
                time.sleep(0.3)
            if tmux.dead(wait_s=0)[0]:
                break
        dead, status = tmux.dead()
        result.exit_status = status if dead else "still running after 3 tries of q"
        if not dead or status != "0" or tmux.printed_traceback():
            crashed(f"closing with q: exit status {result.exit_status}", index)
            pid = tmux("display-message", "-p", "-t", "monkey", "#{pane_pid}").strip()
            result.pane += "\n--- the pane's shell and the console under it ---\n"
            result.pane += process_info(pid)
        return result
    finally:
        with contextlib.suppress(OSError):
            result.quits_held = len(hold.with_name(hold.name + ".held").read_text().splitlines())
        with contextlib.suppress(Exception):
            tmux("kill-server")
        left = kill_leftovers(demo_dir)
        if left:
            print(
                f"[{size}] ended {len(left)} process(es) of the demo still running (eval jobs "
                "outlive the console by design; trainers when the demo did not stop):",
                flush=True,
            )
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
        f"late results dropped {r.late_dropped}  quits held {r.quits_held}  "
        f"exit on q {r.exit_status or '-'}  "
        f"load {'-'.join(f'{x:.1f}' for x in r.load) or '-'}"
    )


def report(r: Result) -> None:
    screens = ", ".join(f"{name} x{n}" for name, n in sorted(r.screens.items()))
    print(summary_line(r).strip(), flush=True)
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
        trace = first_traceback(r.pane)
        if trace:
            print("  the traceback ends:")
            print("\n".join("    " + line for line in trace.splitlines()[-6:]))
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
    print(
        f"monkey: {len(action_keys())} action keys from dflash_tui.console.keymap.ACTIONS",
        flush=True,
    )

    results = []
    with contextlib.ExitStack() as stack:
        root = (
            args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="monkey-")))
        ).resolve()
        for size in sizes:
            r = soak(size, seed, args.minutes, root / size)
            results.append(r)
            report(r)
    print("\nsummary:")
    for r in results:
        print(f"  {summary_line(r)}")
    return 1 if any(r.crash for r in results) else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--as-console"]:
        sys.exit(as_console(sys.argv[2:]))
    sys.exit(main())
