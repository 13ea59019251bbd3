"""The chaos soak's report (bench/chaos.py): every figure counted, none judged by eye.

Pure functions over what the soak recorded: the lines each run's log held against
what `dflash-tui logs RUN -f` printed, the relays, the eval jobs, the webhook's
messages per alerting fault, the console's error log and the CPU of the quiet stretches.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

GOAL_RATIO = 2.0
"""Console (and watch) CPU at rest against ten `ssh host tail -F` with their tmux."""

ALERTING = {"crash": ("RUN DEAD", "RUN RECOVERED"), "reboot": ("HOST DOWN", "HOST RECOVERED")}
"""Faults that must alert once and recover once: the webhook's title words for each."""


def line_counts(written: Counter[str], seen: Sequence[str], destroyed: int) -> dict[str, Any]:
    """Lines written against seen, as multisets (a tqdm bar's last frame repeats legitimately).
    `destroyed`: lines truncated away while the follower's link was cut (never readable)."""
    got = Counter(seen)
    return {
        "written": sum(written.values()),
        "seen": sum(got.values()),
        "lost": max(0, sum((written - got).values()) - destroyed),
        "repeated": sum((got - written).values()),
        "destroyed_while_cut": destroyed,
        "lost_examples": list((written - got).elements())[:5],
        "repeated_examples": list((got - written).elements())[:5],
    }


def alert_counts(
    faults: Iterable[Mapping[str, Any]], messages: Sequence[tuple[float, str]]
) -> list[dict[str, Any]]:
    """Per alerting target (a run that crashed, a host that was rebooted), its conditions as
    the webhook told them: `messages` are (received at, title and body), in any order.

    A condition is an alert followed by its recovery. An alert while the target is already
    down, or a recovery while it is up, is `repeated`; a crash or reboot that found the
    target up and got no alert before the next fault on it (or the end) is a missing alert,
    and a condition never recovered by the end a missing recovery. Other faults (a link
    cut, sshd restarted) may alert the same target: those count as conditions, not repeats.
    """
    by_target: dict[tuple[str, str], list[float]] = {}
    for f in faults:
        if f["kind"] in ALERTING and "error" not in f:
            who = f.get("run") or f.get("host") or ""
            by_target.setdefault((f["kind"], who), []).append(float(f["start"]))
    out = []
    for (kind, who), starts in sorted(by_target.items()):
        alert, recovery = ALERTING[kind]
        word = f"| {'run' if kind == 'crash' else 'host'} {who} |"
        told = sorted(
            (at, alert in m)
            for at, m in messages
            if word in m + " |" and (alert in m or recovery in m)
        )
        down, conditions, recoveries, repeated = False, 0, 0, 0
        for _, is_alert in told:  # after each message the target is down iff it alerted
            if is_alert == down:
                repeated += 1
            elif is_alert:
                conditions += 1
            else:
                recoveries += 1
            down = is_alert
        missing = 0
        bounds = [*sorted(starts), float("inf")]
        for start, next_start in itertools.pairwise(bounds):
            was_down = [a for at, a in told if at <= start][-1:] == [True]
            alerted = any(is_alert and start <= at < next_start for at, is_alert in told)
            missing += not (was_down or alerted)
        missing += down  # never recovered by the end
        out.append({
            "fault": kind, "who": who, "faults": len(starts), "conditions": conditions,
            "alerts": sum(a for _, a in told), "recoveries": recoveries,
            "missing": missing, "repeated": repeated,
        })  # fmt: skip
    return out


def eval_outcomes(evals: Iterable[Mapping[str, Any]], jobs_json: str) -> list[dict[str, Any]]:
    """Each eval started: on the board (done and collected), failed with its reason, or lost
    (`dflash-tui jobs --json` at the end says which)."""
    jobs: dict[str, Mapping[str, Any]] = {}
    try:
        for row in json.loads(jobs_json).get("jobs", []):
            jobs[str(row.get("id"))] = row
    except (ValueError, AttributeError):
        pass
    result = []
    for e in evals:
        row = jobs.get(str(e["job"]), {}) if e["job"] else {}
        state = row.get("state")
        if e["job"] is None:
            outcome = "failed" if e["start_error"] else "lost"
            reason = e["start_error"]
        elif state == "done":
            # collected: its results are in the store the board reads, once (the store keeps
            # one result per suite and checkpoint bytes)
            outcome = "on_board" if row.get("collected_at") else "lost"
            reason = None if outcome == "on_board" else "done but never collected"
        elif state in ("failed", "lost", "cancelled"):
            reason = row.get("error")
            outcome = "failed" if reason else "lost"
        else:
            outcome, reason = "lost", f"state {state!r} at the end"
        result.append({**e, "state": state, "outcome": outcome, "reason": reason})
    return result


def error_entries(path: Path) -> list[str]:
    """The console's error log (ui/guard.py): every entry is an error it did not expect."""
    if not path.exists():
        return []
    return [e[:400] for e in path.read_text(errors="replace").split("\n\n") if e.strip()]


def cpu_at_rest(quiet: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """Mean CPU (% of a core) of console+tmux, watch and the ten tails+tmux over the quiet
    stretches, weighted by their length, and the ratios."""
    total = sum(q["seconds"] for q in quiet)
    cpu = (
        {k: sum(q[k] * q["seconds"] for q in quiet) / total for k in ("console", "watch", "tails")}
        if total
        else {}
    )
    tails = cpu.get("tails") or 0.0
    return {k: round(v, 3) for k, v in cpu.items()} | {
        "stretches": len(quiet),
        "seconds": round(total),
        "console_over_tails": round(cpu["console"] / tails, 2) if tails else None,
        "watch_over_tails": round(cpu["watch"] / tails, 2) if tails else None,
        "per_stretch_console_ratio": [
            round(q["console"] / q["tails"], 2) for q in quiet if q["tails"] > 0
        ],
        "per_stretch_watch_ratio": [
            round(q["watch"] / q["tails"], 2) for q in quiet if q["tails"] > 0
        ],
        # [console, watch, tails] % of a core per stretch: a ratio that moves can be told
        # apart from a baseline that moved (fewer lines written, a tail that died)
        "per_stretch_pct": [[round(q[k], 3) for k in ("console", "watch", "tails")] for q in quiet],
        "goal": GOAL_RATIO,
    }


def totals(
    runs: Mapping[str, Mapping[str, Any]],
    relays: Sequence[Mapping[str, Any]],
    evals: Sequence[Mapping[str, Any]],
    alerts: Sequence[Mapping[str, Any]],
    console: Mapping[str, Any],
    cpu: Mapping[str, Any],
) -> dict[str, Any]:
    """The keys every run reports, in this order."""
    return {
        "lines_lost": sum(r["lost"] for r in runs.values()),
        "lines_repeated": sum(r["repeated"] for r in runs.values()),
        "relays_corrupted": sum(r["outcome"] == "corrupted" for r in relays),
        "relays_failed_without_reason": sum(
            r["outcome"] == "failed" and not r.get("reason") for r in relays
        ),
        "evals_lost": sum(e["outcome"] == "lost" for e in evals),
        "alerts_missing": sum(a["missing"] for a in alerts),
        "alerts_repeated": sum(a["repeated"] for a in alerts),
        "console_alive": console["alive"],
        "unexpected_errors": len(console["unexpected_errors"]),
        "rss_mib_start": console["rss_mib"].get("start"),
        "rss_mib_end": console["rss_mib"].get("end"),
        "cpu_ratio_quiet": cpu.get("console_over_tails"),
    }


def failed(t: Mapping[str, Any]) -> bool:
    """Whether a goal was missed (bench/chaos.py exits 1)."""
    counts = ("lines_lost", "lines_repeated", "relays_corrupted", "relays_failed_without_reason")
    counts += ("evals_lost", "alerts_missing", "alerts_repeated", "unexpected_errors")
    return any(t[k] for k in counts) or not t["console_alive"]


def print_report(report: Mapping[str, Any]) -> None:
    t = report["totals"]
    print(
        f"chaos soak: seed {report['seed']}, {report['minutes']} min, faults {len(report['faults'])}"
    )
    print("totals:", json.dumps(t))
    print(
        f"{'run':<8} {'written':>8} {'seen':>8} {'lost':>5} {'repeated':>8} {'destroyed_while_cut':>20}"
    )
    for name, r in report["runs"].items():
        print(
            f"{name:<8} {r['written']:>8} {r['seen']:>8} {r['lost']:>5} {r['repeated']:>8} {r['destroyed_while_cut']:>20}"
        )
    for r in report["relays"]:
        print(
            f"relay {r['n']} ({r['via']}): {r['outcome']} {r.get('reason') or ''} parts left {r['parts_left']}"
        )
    for e in report["evals"]:
        print(f"eval {e['job']} ({e['why']}): {e['outcome']} {e.get('reason') or ''}")
    for a in report["alerts"]:
        print(
            f"alert {a['fault']} {a['who']}: {a['faults']} fault(s), {a['alerts']} alert(s), {a['recoveries']} recovery(ies)"
        )
    c = report["cpu_quiet_pct"]
    print(
        f"CPU over {c['stretches']} quiet stretches, {c['seconds']} s (% of a core): console+tmux "
        f"{c.get('console')}, watch {c.get('watch')}, ten ssh tails+tmux {c.get('tails')}; "
        f"console {c['console_over_tails']}x, watch {c['watch_over_tails']}x (goal <= {GOAL_RATIO})"
    )
    print("console:", json.dumps(report["console"]))
