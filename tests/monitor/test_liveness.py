"""Process and GPU probes: the probe never finds itself; states; nvidia-smi parsing."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import asyncssh
import pytest

from dflash_tui.core.config_parse import load_config
from dflash_tui.demo.cluster import path_without
from dflash_tui.monitor.gpu import parse_gpu_csv, summarize
from dflash_tui.monitor.liveness import (
    PROBE_SCRIPT,
    LogStat,
    ProbeTarget,
    ProcessInfo,
    RunProbe,
    RunState,
    judge,
    parse_probe,
    probe_argv,
    probe_input,
)
from dflash_tui.monitor.tail import LogTail
from dflash_tui.remote import HostPool, HostUnreachable
from dflash_tui.remote.command import shell_join
from tests.monitor.helpers import Collector, eventually
from tests.testbed import ClientKey, SshdHost, connect_directly


def test_parse_drops_the_probe_its_ancestors_and_our_own_sessions() -> None:
    out = "\n".join(
        [
            "NOW 1700000000.25",
            "SELF 500 500 400 300",
            "RUN 0",
            "STAT 64:12 2048 1699999990",
            "P 500 500 0 sh -c ... dflash-tui-probe",  # the probe itself
            "P 400 300 0 bash -c setsid ...",  # an ancestor
            "P 700 700 9 sh -c ... dflash-tui-tail /w/train.log 0",  # one of our tails
            "P 701 700 9 stat -L -c %s /dev/fd/3 /w/train.log",  # ...and its child
            "P 902 890 0 pgrep -f -- train.py --run a",  # another probe's pgrep, its leader gone
            "P 900 880 7265 python train.py --run a",  # the real thing
            "L 700 sh -c # dflash-tui-tail: follow ... dflash-tui-tail /w/train.log",
            "L 880 tmux new -s train",
            "RUN 1",
            "NOSTAT stat: cannot statx 'b.log': No such file or directory",
            "PERR pgrep: invalid regex",
            "GPU",
            "G 0, NVIDIA H100 80GB HBM3, 93, 71000, 81559",
            "G 1, NVIDIA H100 80GB HBM3, [N/A], 5, 81559",
            "END",
        ]
    )
    probe = parse_probe(out, 2, ["train.py --run a", "b"])
    assert probe.host_now == 1700000000.25
    a, b = probe.runs
    assert a.log == LogStat("64:12", 2048, 1699999990.0)
    assert a.processes == (ProcessInfo(900, 7265, "python train.py --run a", 880),)
    assert b.log is None and "No such file" in (b.log_error or "")
    assert b.pattern_error == "pgrep: invalid regex"
    assert [g.util_pct for g in probe.gpus] == [93.0, None]
    assert summarize(probe.gpus) == "2 GPUs 93% 69/159 GiB"
    with pytest.raises(ValueError):
        parse_probe("NOW 1\nRUN 0\n", 1)  # cut short: no END


def test_nvidia_smi_output_that_is_not_csv_is_an_error_not_gpus() -> None:
    gpus, error = parse_gpu_csv(["NVIDIA-SMI has failed because it couldn't communicate"])
    assert gpus == () and error is not None and "NVIDIA-SMI has failed" in error


def test_probe_input_rejects_line_breaks() -> None:
    assert probe_input([ProbeTarget("a.log", None)]) == "1\na.log\n\n"
    with pytest.raises(ValueError, match="line break"):
        probe_input([ProbeTarget("a\nb.log", "x")])


@pytest.mark.parametrize(
    ("kw", "state", "words"),
    [
        ({"reachable": False, "host_error": "refused"}, RunState.UNKNOWN, "unreachable: refused"),
        ({"probe": None}, RunState.UNKNOWN, "first probe"),
        ({"procs": ()}, RunState.DEAD, "no process matches"),
        ({"age": 400.0}, RunState.STALLED, "no new log line for 6m40s"),
        ({"age": 3.0}, RunState.ALIVE, "pid 9 up 1h01m; last log line 3s ago"),
        ({"log": None}, RunState.STALLED, "missing"),
        ({"pattern": None, "age": 3.0}, RunState.ALIVE, "no `process` pattern"),
        ({"pattern": None, "age": 999.0}, RunState.STALLED, "no `process` pattern"),
    ],
)
def test_states(kw: dict, state: RunState, words: str) -> None:
    procs = kw.pop("procs", (ProcessInfo(9, 3660, "python train.py"),))
    log = kw.pop("log", LogStat("1:2", 10, 0.0))
    probe = kw.pop("probe", RunProbe(log, None if log else "gone", procs))
    args = {
        "host": "h",
        "reachable": True,
        "host_error": None,
        "probe": probe,
        "pattern": kw.pop("pattern", "train.py"),
        "log_path": "train.log",
        "log_age_s": kw.pop("age", 1.0),
        "stall_after_s": 300.0,
    }
    got, reason = judge(**{**args, **kw})
    assert got == state and words in reason


# Runs inside a fresh pid namespace: processes started here keep the session of
# whoever started the test, which this namespace shows as sid 0 (as a container's
# processes show a session led by the host, or by a CI runner outside it).
_SID0_DRIVER = r"""
probe=$1 pat=$PAT tag=$TAG  # not in argv: our own command line must not match
sh -c 'sleep 120; :' "fake-trainer-$tag" &
trainer=$!
setsid sh -c 'sleep 120; :' dflash-tui-tail "train_$tag" &
ours=$!
i=0
while [ "$i" -lt 50 ] && [ "$(pgrep -fc -- "$pat")" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
printf 'TRAINER %s\n' "$trainer"
printf '1\n/nonexistent\n%s\n' "$pat" | sh -c "$probe" dflash-tui-probe
kill "$trainer" "$ours"
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_process_in_a_session_led_from_outside_the_namespace_does_not_hide_our_sessions() -> None:
    # CI caught this: the trainer's sid was 0, `ps -p 0,...` refused the whole list of
    # session leaders, and the probe counted our own tail's processes as the run's.
    tag = uuid.uuid4().hex[:10]
    pattern = f"fake-trainer-{tag}|train_{tag}"
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", _SID0_DRIVER]
    try:
        done = subprocess.run(
            [*argv, "driver", PROBE_SCRIPT],
            env={**os.environ, "PAT": pattern, "TAG": tag},
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the probe did not finish in a pid namespace")
    if done.returncode != 0 and "TRAINER" not in done.stdout:
        pytest.skip(f"cannot make a pid namespace here: {done.stderr.strip()}")
    first, _, rest = done.stdout.partition("\n")
    trainer = int(first.split()[1])
    (run,) = parse_probe(rest, 1).runs
    assert [p.pid for p in run.processes] == [trainer], done.stdout


async def _probe(pool: HostPool, host: str, targets: list[ProbeTarget]):
    result = await pool.run(host, probe_argv(), input=probe_input(targets), timeout=20)
    return parse_probe(result.stdout, len(targets), [t.pattern for t in targets])


async def test_a_pattern_matching_the_probe_and_our_tails_finds_only_the_real_process(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:10]
    log = tmp_path / f"train_{tag}.log"
    log.write_text("step 1 loss 2\n")
    # A regex that also matches the probe's own script, its login shell, and the
    # command line of our live tail of this log.
    pattern = f"dflash-tui-probe|nvidia-smi|train_{tag}|fake[_-]trainer.*{tag}"
    trainer = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", f"fake-trainer-{tag}"]
    )
    try:
        async with HostPool(load_config(write_config({"a": sshd}))) as pool:
            got = Collector(LogTail(pool, "a", str(log))).start()
            try:
                await eventually(lambda: got.texts == ["step 1 loss 2"])
                probe = await _probe(pool, "a", [ProbeTarget(str(log), pattern)])
                (run,) = probe.runs
                assert [p.pid for p in run.processes] == [trainer.pid]
                assert run.processes[0].command.endswith(f"fake-trainer-{tag}")
                assert run.processes[0].elapsed_s is not None
                assert run.log is not None and run.log.size == log.stat().st_size
                trainer.kill()
                trainer.wait()
                probe = await _probe(pool, "a", [ProbeTarget(str(log), pattern)])
                assert probe.runs[0].processes == ()  # not "alive" because of ourselves
            finally:
                await got.close()
    finally:
        trainer.kill()


@pytest.mark.skipif(shutil.which("perl") is None, reason="needs perl to name a process")
async def test_another_probes_pgrep_of_the_pattern_is_not_the_run(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    """The soak's dead runs flapped to "stalled, pid N up 0s": the watch's probe caught
    the console's `pgrep -f -- PATTERN` (the pattern in its argv), which exited before
    the session look-up could tie it to a probe. A process with that command line, in
    a session no marker leads, stands in for the one caught mid-exit."""
    tag = uuid.uuid4().hex[:10]
    log = tmp_path / f"train_{tag}.log"
    log.write_text("step 1 loss 2\n")
    pattern = f"train_dflash_pipeline.py --run r{tag}"
    other = subprocess.Popen(["perl", "-e", f'$0 = "pgrep -f -- {pattern}"; sleep 120'])
    try:
        await eventually(
            lambda: (
                str(other.pid)
                in subprocess.run(
                    ["pgrep", "-f", "--", pattern], capture_output=True, text=True
                ).stdout
            ),
            what="pgrep to match the process named like another probe's pgrep",
        )
        async with HostPool(load_config(write_config({"a": sshd}))) as pool:
            probe = await _probe(pool, "a", [ProbeTarget(str(log), pattern)])
        assert probe.runs[0].processes == ()  # the run is dead, not "up 0s"
    finally:
        other.kill()
        other.wait()


class _CountingSession(asyncssh.SSHClientSession[bytes]):
    """Counts the stdout chunks that arrive: one per SSH data packet sshd sent."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.done = asyncio.Event()

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype is None:
            self.chunks.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.done.set()


async def test_the_probe_reaches_the_console_in_one_packet_not_one_per_line(
    sshd: SshdHost, client_key: ClientKey, known_hosts: Path, tmp_path: Path
) -> None:
    # Printed line by line, a probe of 10 live runs arrived as ~60 packets (24.5 ms of
    # console CPU each probe, every refresh_s, per host); printed at the end, as one.
    tag = uuid.uuid4().hex[:10]
    trainers, targets = [], []
    for i in range(10):
        log = tmp_path / f"train_{i}.log"
        log.write_text("step 1\n")
        trainers.append(
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"tr-{tag}-{i}"])
        )
        targets.append(ProbeTarget(str(log), f"tr-{tag}-{i}$"))
    known_hosts.write_text(sshd.known_hosts_line())
    try:
        async with connect_directly(sshd, client_key, known_hosts) as conn:
            chan, session = await conn.create_session(
                _CountingSession, shell_join(probe_argv()), encoding=None
            )
            chan.write(probe_input(targets).encode())
            chan.write_eof()
            await asyncio.wait_for(session.done.wait(), 30)
        probe = parse_probe(b"".join(session.chunks).decode(), len(targets))
        assert [[p.pid for p in r.processes] for r in probe.runs] == [[t.pid] for t in trainers]
        # One write of ~2 KB; sshd may still split it, never into one packet per line.
        assert len(session.chunks) <= 2, [len(c) for c in session.chunks]
    finally:
        for t in trainers:
            t.kill()


async def test_gpus_from_nvidia_smi_inside_the_exec_prefix_and_none_without_it(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    smi = fakebin / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "0, NVIDIA H200, 77, 1000, 143771"\n')
    smi.chmod(0o755)
    prefix = ["env", f"PATH={fakebin}:/usr/local/bin:/usr/bin:/bin"]
    # `plain` stands for a host without GPUs, also on a machine that has a real nvidia-smi.
    no_smi = path_without("nvidia-smi", "/usr/local/bin:/usr/bin:/bin", tmp_path / "no-smi")
    plain = ["env", f"PATH={':'.join(no_smi)}"]
    config = write_config(
        {"gpu": (sshd, {"exec_prefix": prefix}), "plain": (sshd, {"exec_prefix": plain})}
    )
    async with HostPool(load_config(config)) as pool:
        with_gpu = await _probe(pool, "gpu", [ProbeTarget("nope.log", "no-such-process-x1")])
        assert with_gpu.has_nvidia_smi and with_gpu.gpus[0].name == "NVIDIA H200"
        assert with_gpu.runs[0].log is None and with_gpu.runs[0].processes == ()
        plain = await _probe(pool, "plain", [])
        assert not plain.has_nvidia_smi and plain.gpus == () and plain.gpu_error is None
        bad = await _probe(pool, "plain", [ProbeTarget("x.log", "(unclosed")])
        assert bad.runs[0].pattern_error


def _hung_nvidia_smi(folder: Path) -> tuple[list[str], Path]:
    """An exec_prefix whose PATH has an nvidia-smi that never answers, and its pid file."""
    fakebin = folder / "hungbin"
    fakebin.mkdir()
    pid_file = folder / "smi.pid"
    smi = fakebin / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\necho $$ > "{pid_file}"\nexec sleep 1000\n')
    smi.chmod(0o755)
    return ["env", f"PATH={fakebin}:/usr/local/bin:/usr/bin:/bin"], pid_file


async def _exited(pid_file: Path, within_s: float) -> None:
    await eventually(lambda: pid_file.exists(), within_s, "nvidia-smi to start")
    pid = int(pid_file.read_text())
    await eventually(
        lambda: not Path(f"/proc/{pid}").exists(), within_s, f"hung nvidia-smi {pid} to exit"
    )


async def test_a_probe_that_times_out_leaves_no_process_on_the_host(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    prefix, pid_file = _hung_nvidia_smi(tmp_path)
    config = write_config({"gpu": (sshd, {"exec_prefix": prefix})})
    async with HostPool(load_config(config)) as pool:
        with pytest.raises(HostUnreachable, match="timed out after 2s"):
            await pool.run("gpu", probe_argv(), input=probe_input([]), timeout=2)
        # Killed with the probe's group, well before nvidia-smi's own 10 s limit.
        await _exited(pid_file, 5)


async def test_a_hung_nvidia_smi_is_cut_off_and_reported(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    prefix, pid_file = _hung_nvidia_smi(tmp_path)
    config = write_config({"gpu": (sshd, {"exec_prefix": prefix})})
    async with HostPool(load_config(config)) as pool:
        probe = await _probe(pool, "gpu", [])
    assert probe.has_nvidia_smi and probe.gpus == ()
    assert "did not answer within 10s" in (probe.gpu_error or "")
    await _exited(pid_file, 5)


async def test_the_kept_running_probe_answers_and_starts_again_after_its_script_dies(
    sshd: SshdHost, write_config, tmp_path: Path
) -> None:
    """ProbeStream: probes and round trips over one remote script; if the script dies
    the next probe fails (the host's error for one refresh) and the one after starts a
    new script, so a probe loop recovers by itself."""
    import os
    import signal

    from dflash_tui.monitor.probe_stream import ProbeStream
    from dflash_tui.remote.errors import RemoteError

    log = tmp_path / "kept.log"
    log.write_text("step 1\n")
    targets = [ProbeTarget(str(log), "no-such-process-kept-x")]
    async with HostPool(load_config(write_config({"a": sshd}))) as pool:
        async with ProbeStream(pool, "a") as probes:
            first = parse_probe(await probes.probe(targets, 20), 1)
            assert first.runs[0].log is not None and first.runs[0].processes == ()
            assert await probes.round_trip(targets, 20) > 0
            again = parse_probe(await probes.probe(targets, 20), 1)
            assert again.host_now >= first.host_now and probes.starts == 1
            assert probes._stream is not None and probes._stream.pgid is not None
            os.killpg(probes._stream.pgid, signal.SIGKILL)
            with pytest.raises(RemoteError):
                await probes.probe(targets, 20)
            assert parse_probe(await probes.probe(targets, 20), 1).runs[0].log is not None
            assert probes.starts == 2
