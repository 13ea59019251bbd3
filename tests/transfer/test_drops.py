"""Links cut at random points of real relays through a jump host: every relay still ends well.

The eval and train hosts are OpenSSH sshd in network namespaces that reach
only this machine (isolated_pair). `dflash-tui relay` runs as an operator
runs it (a process, its exit status, its JSON lines); at a random moment one
of its two connections is cut for real, either by killing that host's sshd
session processes or by `ss -K` aborting the TCP socket inside the host's
namespace. Whatever the moment (connecting, listing, streaming, hashing,
renaming), the relay must exit 0 with sha256 equal at both ends, never show a
partial file under the final name, and re-send little beyond what was lost
in flight.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.testbed import sha256_file
from tests.transfer.files import part_files, random_file

MIB = 1 << 20
SIZE = 32 * MIB
TRIALS = 10
ROOT = Path(__file__).resolve().parents[2]


def _relay(config: Path, src: str, dst: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    argv = [sys.executable, "-m", "dflash_tui", "relay", "--config", str(config), "--json"]
    return subprocess.Popen(
        [*argv, "--retries", "8", src, dst],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _events(stdout: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


class _Watch:
    """Reads the relay's JSON lines as they come; at each retry notes how much of the
    file had landed in NAME.part (the lost bytes are those sent beyond it)."""

    def __init__(
        self, proc: subprocess.Popen[str], part: Path, cut_at: int | None, cut: Callable[[], object]
    ) -> None:
        self.proc = proc
        self.part = part
        self.cut_at = cut_at  # cut the link once this many bytes were reported done
        self.cut = cut
        self.lines: list[str] = []
        self.drops: list[tuple[int, int]] = []  # (bytes sent so far, bytes in NAME.part)
        self.complete_seen: list[str] = []  # sha256 of the final name whenever it was there
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            progress = '"file_progress"' in line
            if (
                progress
                and self.cut_at is not None
                and json.loads(line)["bytes_done"] >= self.cut_at
            ):
                self.cut_at = None
                self.cut()
            final = self.part.with_suffix("")
            if final.exists():  # the rename is the last step: whatever is there is complete
                self.complete_seen.append(hashlib.sha256(final.read_bytes()).hexdigest())
            if '"retrying"' in line:
                # The attempt is over (its streams closed); the retry waits >= 0.4 s.
                time.sleep(0.2)
                final = self.part.with_suffix("")
                landed = self.part.stat().st_size if self.part.exists() else 0
                if not landed and final.exists():  # renamed before the link dropped
                    landed = final.stat().st_size
                self.drops.append((json.loads(line)["bytes_sent"], landed))

    def finish(self) -> tuple[str, str]:
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        self.proc.wait(timeout=60)
        self.thread.join(10)
        return "".join(self.lines), err

    def lost(self) -> int:
        """Bytes sent but not in NAME.part when their link dropped (one file, one stream:
        attempt i sent the file from where attempt i-1 landed up to where it was cut)."""
        lost, sent_before, start = 0, 0, 0
        for sent, landed in self.drops:
            reached = start + (sent - sent_before)
            lost += max(0, reached - landed)
            sent_before, start = sent, landed
        return lost


def test_random_drops_end_in_a_verified_copy_every_time(isolated_pair, write_config) -> None:
    a, b, ns_a, ns_b = isolated_pair
    config = write_config({"eval": a, "train": b})
    sha = random_file(a.home / "model.safetensors", SIZE, seed=14)
    src = f"eval:{a.home}/model.safetensors"
    rng = random.Random(int(os.environ.get("DFLASH_DROP_SEED", "1414")))
    # A link of 256 Mbit/s towards train: the file takes about a second on the wire,
    # so a cut at a given byte lands while the stream runs, even on a busy machine.
    shaped = subprocess.run(
        ["tc", "qdisc", "add", "dev", f"{ns_b.name}o", "root", "tbf", "rate", "256mbit",
         "burst", "256kb", "latency", "50ms"],
        capture_output=True, text=True,
    )  # fmt: skip
    if shaped.returncode != 0:
        pytest.skip(f"cannot shape the test link with tc: {shaped.stderr.strip()}")

    started = time.monotonic()
    clean = _relay(config, src, f"train:{b.home}/clean.bin")
    out, err = clean.communicate(timeout=60)
    clean_s = time.monotonic() - started
    assert clean.returncode == 0, err
    (b.home / "clean.bin").unlink()

    cuts = {
        "kill eval sshd": lambda: a.kill_sessions(),
        "kill train sshd": lambda: b.kill_sessions(),
        "ss -K eval": lambda: ns_a.run("ss", "-K", "sport", "=", ":22"),
        "ss -K train": lambda: ns_b.run("ss", "-K", "sport", "=", ":22"),
    }
    report = []
    dropped = 0
    for trial in range(TRIALS):
        final = b.home / f"copy{trial}.bin"
        how = rng.choice(sorted(cuts))
        proc = _relay(config, src, f"train:{final}")
        if trial % 2:  # any moment: connecting, listing, streaming, hashing, renaming
            at = f"{rng.uniform(0.1, 1.0) * clean_s:.2f} s"
            watch = _Watch(proc, Path(f"{final}.part"), None, cuts[how])
            time.sleep(float(at.split()[0]))
            cuts[how]()
        else:  # mid-stream, at a random byte
            fraction = rng.uniform(0.05, 0.95)
            at = f"{fraction:.0%} of the file"
            watch = _Watch(proc, Path(f"{final}.part"), int(fraction * SIZE), cuts[how])
        out, err = watch.finish()
        events = _events(out)
        retries = sum(e["event"] == "retrying" for e in events)
        dropped += retries > 0
        assert set(watch.complete_seen) <= {sha}, f"trial {trial}: partial file under final name"
        assert proc.returncode == 0, f"trial {trial} ({how} at {at}): {err[-1500:]}{events[-3:]}"
        verified = [e for e in events if e["event"] == "file_verified"]
        assert verified and verified[0]["sha256_src"] == verified[0]["sha256_dst"] == sha
        assert sha256_file(final) == sha
        assert not part_files(b.home)
        finished = next(e for e in events if e["event"] == "transfer_finished")
        resent = finished["bytes_sent"] - SIZE
        lost = watch.lost()
        report.append(
            f"{how} at {at}: {retries} retries, {resent / MIB:.2f} MiB sent again, "
            f"{lost / MIB:.2f} MiB of it lost in flight"
        )
        # Only what was in flight when the link dropped goes again, give or take the
        # last MiB: the destination reports every MiB it has written, a retry goes on
        # from there.
        assert resent - lost <= SIZE // 10, f"trial {trial}: {report[-1]}"
        final.unlink()
    print("\n".join(report))
    assert dropped >= TRIALS // 2, f"only {dropped} of {TRIALS} trials saw a drop: {report}"
