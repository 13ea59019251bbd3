"""What a transfer is asked to do and what it reports, shared by the host relay and S3.

Kept apart from both engines so each imports it and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_tui.transfer.verify import DEFAULT_RANGE_BYTES


@dataclass(frozen=True)
class RelayOptions:
    """How to run a transfer; the defaults are what `dflash-tui relay` uses."""

    force: bool = False
    keep_local: str | None = None
    direct: bool = False
    retries: int = 5
    streams: int = 4
    range_bytes: int = DEFAULT_RANGE_BYTES
    check_space: bool = True
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0
    progress_interval_s: float = 0.1
    # Large files' pieces through worker processes, each with its own connections
    # (transfer/hosts/procs.py): the SSH crypto of both legs spread over the cores. None:
    # where this machine has WORKERS_MIN_CORES or more (on 2 cores shared with both
    # hosts' sshd they cost more than they bring: docs/benchmarks-history.md
    # "2026-12-03: the relay as a stranger measures it").
    worker_processes: bool | None = None
    # Fresh large files host to host through two OpenSSH client processes piped by the
    # OS (transfer/hosts/ssh_legs.py); off: the streams carry them.
    openssh_legs: bool = True
    # A large file host to host over this many streams, each through its own `ssh` pair
    # (transfer/hosts/ssh_streams.py). None: from the legs' round trip measured at the
    # walk (1 on a short link: one pair of legs); 1: never.
    long_streams: int | None = None
    # Those streams' two `ssh` piped together by the OS, so no byte passes through this
    # process (transfer/hosts/ssh_splice.py); off: this process forwards each chunk.
    splice: bool = True


@dataclass(frozen=True)
class FileResult:
    """One file of a finished transfer, with both ends' sha256."""

    path: str
    dst: str
    size: int
    sha256_src: str
    sha256_dst: str
    skipped: bool


@dataclass(frozen=True)
class TransferResult:
    """A finished, verified transfer; `bytes_sent` counts only what this run moved."""

    transfer_id: str
    src: str
    dst: str
    mode: str
    files: list[FileResult]
    bytes_total: int
    bytes_sent: int
    elapsed_s: float
    resumed: bool
    keep_local: str | None = None

    @property
    def rate_bps(self) -> float:
        return self.bytes_sent / self.elapsed_s if self.elapsed_s > 0 else 0.0
