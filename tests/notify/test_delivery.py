"""Real delivery through apprise to a webhook server on loopback (json:// and form://).

The once-per-condition rule, the recovery message, the claim shared by two
processes on one state database, the events filter, the per-target rate limit,
a failing target reported beside a working one, and a secret in a URL that
reaches the server but nothing else: not output, not logs, not the database.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from dflash_tui.core.schemas import NOTIFICATIONS
from dflash_tui.core.state import open_state
from dflash_tui.notify import (
    Notice,
    Notifier,
    NotifySettings,
    NotifyStore,
    NotifyUnavailable,
    parse_notify,
)
from dflash_tui.notify.store import RATE_WINDOW_S
from tests.notify.hookserver import HookServer


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(
    tmp_path: Path,
    urls: list[str],
    *,
    env: dict[str, str] | None = None,
    pid: int = 1,
    clock: Clock | None = None,
    **table: object,
) -> Notifier:
    settings, problems = parse_notify({"urls": urls, **table}, env or {})
    assert settings is not None, problems
    conn = open_state(tmp_path / "state", NOTIFICATIONS)
    return Notifier(settings, NotifyStore(conn, pid=pid), env=env or {}, clock=clock or Clock())


DEAD = Notice(
    "run_dead",
    "no train_dflash_pipeline.py process",
    host="ct200",
    run="slammed5",
    details=("step 41200/70000, loss 2.31, acc 0.41", "log silent for 6m"),
)


async def test_a_dead_run_is_sent_once_and_its_recovery_once(
    tmp_path: Path, hook: HookServer
) -> None:
    clock = Clock()
    n = make(tmp_path, [f"json://127.0.0.1:{hook.port}/hook"], clock=clock)
    out = await n.alert("run:slammed5", DEAD)
    assert out.sent and out.deliveries[0].ok, out
    assert out.deliveries[0].target == "json://127.0.0.1"
    again = await n.alert("run:slammed5", DEAD)  # the next refresh sees it still dead
    assert not again.sent and again.skipped == "already sent while it holds"
    clock.t += 420
    back = Notice("run_dead", "process running again", host="ct200", run="slammed5")
    rec = await n.recover("run:slammed5", back)
    assert rec.sent
    assert not (await n.recover("run:slammed5", back)).sent
    got = hook.received()
    assert [m.message for m in got] == [
        "RUN DEAD | host ct200 | run slammed5 | no train_dflash_pipeline.py process\n"
        "step 41200/70000, loss 2.31, acc 0.41\nlog silent for 6m",
        "RUN RECOVERED | host ct200 | run slammed5 | process running again\ndead for 7m00s",
    ]
    assert [m.title for m in got] == [
        "dflash-tui: run dead slammed5",
        "dflash-tui: run recovered slammed5",
    ]
    assert [m.body["type"] for m in got] == ["failure", "success"]


async def test_stalled_then_dead_is_news_but_not_a_repeat(tmp_path: Path, hook: HookServer) -> None:
    n = make(tmp_path, [f"json://127.0.0.1:{hook.port}/"])
    stalled = Notice("run_stalled", "log silent for 5m", host="ct200", run="r")
    assert (await n.alert("run:r", stalled)).sent
    assert not (await n.alert("run:r", stalled)).sent
    assert (await n.alert("run:r", Notice("run_dead", "gone", host="ct200", run="r"))).sent
    assert [m.message.split(" |")[0] for m in hook.received()] == ["RUN STALLED", "RUN DEAD"]


async def test_two_processes_share_one_claim(tmp_path: Path, hook: HookServer) -> None:
    url = [f"form://127.0.0.1:{hook.port}/form"]
    console = make(tmp_path, url, pid=100)
    watch = make(tmp_path, url, pid=200)  # a second connection to the same database
    down = Notice("host_down", "connection refused", host="ct129")
    assert (await console.alert("host:ct129", down)).sent
    assert not (await watch.alert("host:ct129", down)).sent
    up = Notice("host_down", "reachable again", host="ct129")
    assert (await watch.recover("host:ct129", up)).sent
    assert not (await console.recover("host:ct129", up)).sent
    done = Notice("eval_finished", "tau_greedy 4.12", host="ct129", run="slammed5")
    results = [await p.event("job:abc:done", done) for p in (console, watch, console)]
    assert [r.sent for r in results] == [True, False, False]
    got = hook.received()
    assert [m.message.split(" |")[0] for m in got] == [
        "HOST DOWN",
        "HOST RECOVERED",
        "EVAL FINISHED",
    ]
    assert all(m.path == "/form" for m in got)


async def test_events_choose_what_is_sent(tmp_path: Path, hook: HookServer) -> None:
    n = make(tmp_path, [f"json://127.0.0.1:{hook.port}/"], events=["eval_failed"])
    assert (await n.alert("run:r", DEAD)).skipped == "event not chosen in [notify] events"
    assert (await n.event("job:1:done", Notice("eval_finished", "ok"))).skipped
    assert (await n.event("job:2:failed", Notice("eval_failed", "exit 1"))).sent
    # the unsent condition is still tracked: its recovery is not sent either
    assert not (await n.recover("run:r", Notice("run_dead", "back"))).sent
    assert len(hook.received()) == 1


async def test_rate_limit_per_target_counts_what_it_held(tmp_path: Path, hook: HookServer) -> None:
    clock = Clock()
    n = make(tmp_path, [f"json://127.0.0.1:{hook.port}/"], clock=clock, max_per_hour=2)
    for i in range(5):  # a flapping host
        clock.t += 60
        out = await n.event(f"k{i}", Notice("relay_failed", f"attempt {i}", host="h"))
        assert out.deliveries[0].rate_limited == (i >= 2), out
    assert len(hook.received()) == 2
    clock.t += RATE_WINDOW_S
    out = await n.event("k5", Notice("relay_finished", "copied", host="h"))
    assert out.deliveries[0].ok
    got = hook.received()
    assert len(got) == 3
    assert got[-1].message.endswith("(3 earlier messages held back by the rate limit)")


async def test_failing_target_is_reported_beside_a_working_one(
    tmp_path: Path, hook: HookServer
) -> None:
    dead = HookServer(status=500).start()
    try:
        n = make(tmp_path, [f"json://127.0.0.1:{dead.port}/", f"json://127.0.0.1:{hook.port}/"])
        results = await n.test()
    finally:
        dead.stop()
    assert [(r.target, r.ok) for r in results] == [
        ("json://127.0.0.1", False),
        ("json://127.0.0.1", True),
    ]
    assert results[0].error and "500" in results[0].error
    assert hook.received()[0].message.startswith("TEST | test message from dflash-tui")


async def test_secret_reaches_the_server_and_nothing_else(
    tmp_path: Path,
    hook: HookServer,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret_pw, secret_path = "pw-Zq81vX0hunter", "tok-7c1f0e9d2b3a"
    env = {"HOOK_PW": secret_pw, "HOOK_TOKEN": secret_path}
    refused = HookServer(status=403).start()
    urls = [
        f"json://ops:${{HOOK_PW}}@127.0.0.1:{hook.port}/hook/${{HOOK_TOKEN}}",
        f"json://ops:${{HOOK_PW}}@127.0.0.1:{refused.port}/hook/${{HOOK_TOKEN}}",
    ]
    caplog.set_level(logging.DEBUG)  # apprise logs request URLs at debug level
    logging.getLogger("apprise").setLevel(logging.DEBUG)
    try:
        n = make(tmp_path, urls, env=env)
        outcomes = [await n.alert("run:r", DEAD), await n.event("e", Notice("eval_failed", "x"))]
        tests = await n.test()
    finally:
        refused.stop()
        logging.getLogger("apprise").setLevel(logging.NOTSET)
    got = hook.received()
    assert len(got) == 3
    assert got[0].path == f"/hook/{secret_path}"  # the secret was used...
    assert got[0].authorization and got[0].authorization.startswith("Basic ")
    shown = "\n".join(
        [repr(n.settings), repr(n.targets)]
        + [d.describe() for o in outcomes for d in o.deliveries]
        + [d.describe() for d in tests]
    )
    print(shown)
    assert any(not d.ok for d in tests), "the refused target must fail"
    captured = capsys.readouterr()
    logs = "\n".join(r.getMessage() for r in caplog.records)
    assert "JSON POST URL" in logs  # apprise's debug line was logged, scrubbed
    db = "\n".join(sqlite3.connect(tmp_path / "state" / "state.sqlite3").iterdump())
    for secret in (secret_pw, secret_path):
        for where, text in (
            ("output", captured.out + captured.err + shown),
            ("logs", logs),
            ("state", db),
        ):
            assert secret not in text, f"secret in {where}"


def test_missing_apprise_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "apprise", None)  # import apprise now raises ImportError
    conn = open_state(tmp_path, NOTIFICATIONS)
    with pytest.raises(NotifyUnavailable, match=r"pip install 'dflash-tui\[notify\]'"):
        Notifier(NotifySettings(("json://localhost/",)), NotifyStore(conn))


def test_messages_are_one_line_then_details() -> None:
    body = DEAD.body().splitlines()
    assert body[0] == "RUN DEAD | host ct200 | run slammed5 | no train_dflash_pipeline.py process"
    assert len(body) == 3
    long = Notice("eval_failed", "x" * 500, details=tuple(f"d{i}" for i in range(20)))
    assert len(long.body().splitlines()) == 7 and len(long.headline()) <= 200
    assert os.linesep not in long.headline()
