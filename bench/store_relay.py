"""Store relay throughput: `dflash-tui relay` to and from S3 against the operator's pipe.

Starts one real OpenSSH sshd host on loopback (the test bed's SshdHost) and
moto's standalone S3 server, writes one incompressible file (256 MiB by
default) on the host, then moves it with each method in turn, for several
interleaved rounds, and prints the median time, MB/s and the ratios:

* up, `dflash-tui relay a:FILE bk:KEY` (the CLI: parts hashed on the host and
  here, SHA-256 per part, sha256 metadata, completed after verification);
* up, `ssh a cat FILE | python -c 'upload_fileobj(stdin)'` (boto3's managed
  streaming multipart upload, what `ssh a cat FILE | aws s3 cp - s3://...`
  does; nothing verified end to end);
* down, `dflash-tui relay bk:KEY a:DST` (ranged GETs into NAME.part, sha256
  at the destination checked against the metadata, rename);
* down, `python -c 'download_fileobj(stdout)' | ssh a 'cat > DST'` (as
  `aws s3 cp s3://... - | ssh a 'cat > DST'`; nothing verified).

Every copy is checked by sha256 afterwards; a wrong one aborts. moto is a
Python server on this same machine: the figures compare the two clients
against the same (slow) server, not what a real S3 endpoint would give.

    .venv/bin/python bench/store_relay.py                  # 256 MiB, 3 rounds
    .venv/bin/python bench/store_relay.py --size-mib 64 --rounds 1
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.testbed import (  # noqa: E402
    ClientKey,
    SshdHost,
    free_port,
    hosts_toml,
    sha256_file,
    sshd_host_entry,
    wait_for_port,
)

MB = 1_000_000
PY = sys.executable
UPLOAD = """
import sys, boto3
from boto3.s3.transfer import TransferConfig
c = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
c.upload_fileobj(sys.stdin.buffer, sys.argv[2], sys.argv[3],
                 Config=TransferConfig(multipart_chunksize=16 << 20, max_concurrency=4))
"""
DOWNLOAD = """
import sys, boto3
from boto3.s3.transfer import TransferConfig
c = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1")
c.download_fileobj(sys.argv[2], sys.argv[3], sys.stdout.buffer,
                   Config=TransferConfig(multipart_chunksize=16 << 20, max_concurrency=4))
"""


def object_sha(client, bucket: str, key: str) -> str:  # type: ignore[no-untyped-def]
    body = client.get_object(Bucket=bucket, Key=key)["Body"]
    digest = hashlib.sha256()
    while chunk := body.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


class Bench:
    def __init__(self, work: Path, size: int, streams: int) -> None:
        import boto3

        self.work = work
        self.streams = streams
        os.environ.update(
            AWS_ACCESS_KEY_ID="AKIABENCH", AWS_SECRET_ACCESS_KEY=secrets.token_hex(16),
            AWS_DEFAULT_REGION="us-east-1",
        )  # fmt: skip
        port = free_port()
        self.moto = subprocess.Popen(
            [PY, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for_port("127.0.0.1", port, 30)
        self.endpoint = f"http://127.0.0.1:{port}"
        self.bucket = "dflash-bench"
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")
        self.s3.create_bucket(Bucket=self.bucket)
        self.key = ClientKey.generate(work / "key")
        self.host = SshdHost(root=work / "sshd-a", client_key=self.key).start()
        self.known = work / "known_hosts"
        self.known.write_text(self.host.known_hosts_line())
        self.config = hosts_toml(
            work / "hosts.toml",
            {"a": sshd_host_entry(self.host, self.key)},
            known_hosts=self.known,
            extra=(
                f'\n[stores.bk]\nurl = "s3://{self.bucket}/bench"\n'
                f'endpoint_url = "{self.endpoint}"\nregion = "us-east-1"\n'
            ),
        )
        self.src = self.host.home / "model.safetensors"
        with self.src.open("wb") as handle:
            for _ in range(size // (1 << 20)):
                handle.write(os.urandom(1 << 20))
        self.sha = sha256_file(self.src)
        self.s3.upload_file(str(self.src), self.bucket, "bench/source.bin")
        self.n = 0

    def close(self) -> None:
        self.host.stop()
        self.moto.terminate()

    def _ssh(self) -> list[str]:
        return [
            "ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.known}",
            "-i", str(self.key.private), "-p", str(self.host.port), "root@127.0.0.1",
        ]  # fmt: skip

    def _cli(self, *args: str) -> float:
        cmd = [PY, "-m", "dflash_tui", "--config", str(self.config), "relay", "--json", *args]
        cmd += ["--streams", str(self.streams), "--range-mib", "16"]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        started = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - started
        if out.returncode != 0:
            raise SystemExit(f"relay failed: {out.stderr or out.stdout[-2000:]}")
        return elapsed

    def up_relay(self) -> float:
        self.n += 1
        key = f"up{self.n}.bin"
        elapsed = self._cli(f"a:{self.src}", f"bk:{key}")
        assert object_sha(self.s3, self.bucket, f"bench/{key}") == self.sha
        return elapsed

    def up_pipe(self) -> float:
        self.n += 1
        key = f"bench/up{self.n}.bin"
        started = time.perf_counter()
        cat = subprocess.Popen([*self._ssh(), "cat", str(self.src)], stdout=subprocess.PIPE)
        subprocess.run(
            [PY, "-c", UPLOAD, self.endpoint, self.bucket, key], stdin=cat.stdout, check=True
        )
        cat.wait()
        elapsed = time.perf_counter() - started
        assert object_sha(self.s3, self.bucket, key) == self.sha
        return elapsed

    def down_relay(self) -> float:
        self.n += 1
        dst = self.host.home / f"down{self.n}.bin"
        elapsed = self._cli("bk:source.bin", f"a:{dst}")
        assert sha256_file(dst) == self.sha
        dst.unlink()
        return elapsed

    def down_pipe(self) -> float:
        self.n += 1
        dst = self.host.home / f"down{self.n}.bin"
        started = time.perf_counter()
        get = subprocess.Popen(
            [PY, "-c", DOWNLOAD, self.endpoint, self.bucket, "bench/source.bin"],
            stdout=subprocess.PIPE,
        )
        subprocess.run([*self._ssh(), f"cat > {dst}"], stdin=get.stdout, check=True)
        get.wait()
        elapsed = time.perf_counter() - started
        assert sha256_file(dst) == self.sha
        dst.unlink()
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dflash-store-bench-") as tmp:
        bench = Bench(Path(tmp), args.size_mib << 20, args.streams)
        methods = {
            "up: dflash-tui relay": bench.up_relay,
            "up: ssh cat | boto3 upload_fileobj": bench.up_pipe,
            "down: dflash-tui relay": bench.down_relay,
            "down: boto3 download_fileobj | ssh cat": bench.down_pipe,
        }
        times: dict[str, list[float]] = {name: [] for name in methods}
        try:
            for _ in range(args.rounds):
                for name, method in methods.items():
                    times[name].append(method())
        finally:
            bench.close()
    size = args.size_mib << 20
    print(f"{platform.node()}: {args.size_mib} MiB, {args.rounds} round(s), moto on loopback")
    print(f"load average: {os.getloadavg()}")
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, median in medians.items():
        print(f"  {name:<40} {median:7.2f} s  {size / median / MB:8.1f} MB/s")
    up = medians["up: ssh cat | boto3 upload_fileobj"] / medians["up: dflash-tui relay"]
    down = medians["down: boto3 download_fileobj | ssh cat"] / medians["down: dflash-tui relay"]
    print(f"  speed ratio (relay / operator pipe): up {up:.2f}x, down {down:.2f}x")


if __name__ == "__main__":
    main()
