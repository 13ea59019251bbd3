"""hosts.toml's typed, frozen objects, the problems found in one, and where it is.

Reading and checking the file (`load_config`, `parse_config`) is in
`core/config_parse.py`; every other module reads only these objects.
"""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dflash_tui.core.notify_settings import NotifySettings

CONFIG_ENV = "DFLASH_TUI_CONFIG"
DEFAULT_CONFIG_NAME = "hosts.toml"


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a config file, worded for the person editing it."""

    path: Path
    key: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else f"{self.path}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(Exception):
    """The config cannot be used; carries every problem found."""

    def __init__(self, problems: Iterable[ConfigProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class ConsoleConfig:
    """The `[console]` table: local settings of the console itself."""

    results_dir: Path
    state_dir: Path
    known_hosts: Path
    refresh_s: float = 2.0
    bell: bool = True
    connect_timeout_s: float = 10.0
    keepalive_s: float = 15.0
    stall_after_s: float = 300.0
    hf_endpoint: str | None = None  # a Hugging Face Hub mirror for `fetch hf:...`
    # served tau under this fraction of the drafter's offline tau_greedy: an alert
    # (docs/monitoring.md "A served drafter that collapsed")
    collapse_fraction: float = 0.6


@dataclass(frozen=True)
class StoreConfig:
    """One `[stores.NAME]` table: an S3 (or S3-compatible) place checkpoints live.

    Only where the objects are; credentials come from the standard AWS chain
    (environment, `profile` in ~/.aws, instance role) and are never in here.
    """

    name: str
    url: str  # s3://bucket/prefix as written
    bucket: str
    prefix: str  # without leading or trailing '/' ('' for the whole bucket)
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None


@dataclass(frozen=True)
class SlurmConfig:
    """`[hosts.NAME.slurm]`: how eval jobs are submitted on a Slurm host."""

    partition: str | None = None
    gres: str | None = None
    time: str | None = None
    account: str | None = None
    extra_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostConfig:
    """One `[hosts.NAME]` table: how to reach a machine and run commands there."""

    name: str
    address: str
    user: str | None = None
    port: int | None = None
    identity: Path | None = None
    jump: str | None = None
    python: str = "python3"
    model_roots: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    exec_prefix: tuple[str, ...] = ()
    max_sessions: int = 10
    env: Mapping[str, str] = field(default_factory=dict)
    scheduler: str = "ssh"
    slurm: SlurmConfig | None = None
    device: str | None = None  # "cuda" or "cpu" for eval jobs; None: cuda (see docs/evals.md)
    # the engines a served bench starts (docs/evals.md "Served bench jobs"): a path or an argv
    vllm: tuple[str, ...] | None = None
    sglang: tuple[str, ...] | None = None


@dataclass(frozen=True)
class MetricsEndpoint:
    """A server's Prometheus endpoint as its own host sees it (`[[runs]] metrics`).

    Read through the host's SSH connection (a direct-tcpip channel to
    `address:port`), so `address` is resolved on that host: 127.0.0.1 is the
    host itself, not the console's machine.
    """

    url: str  # as written
    address: str
    port: int
    path: str  # with its query, if any


@dataclass(frozen=True)
class RunConfig:
    """One `[[runs]]` entry: a training run whose log, tracker and process we watch.

    `log` may be None when the run names a tracker (`tensorboard`, `trackio` with
    `trackio_run`, or `wandb`): its numbers then come from the tracker alone.
    """

    name: str
    host: str
    log: str | None
    process: str | None = None
    total_steps: int | None = None
    metric_patterns: tuple[str, ...] = ()
    stall_after_s: float | None = None
    checkpoints: str | None = None
    auto_eval: tuple[str, ...] = ()
    max_parallel: int = 1
    # a vLLM or SGLang server's /metrics: served acceptance read exactly (docs/monitoring.md "Served acceptance")
    metrics: MetricsEndpoint | None = None
    # the trainer's tracker (docs/monitoring.md "Trackers"): a TensorBoard log directory,
    # a trackio database and the run's name in it, or a W&B offline run directory
    tensorboard: str | None = None
    trackio: str | None = None
    trackio_run: str | None = None
    wandb: str | None = None
    drafter: str | None = None  # the checkpoint a server runs, where its argv does not say

    @property
    def tracker(self) -> tuple[str, str] | None:
        """(kind, path) of the run's tracker: "tensorboard", "trackio" or "wandb"."""
        for kind in TRACKER_KEYS:
            path = getattr(self, kind)
            if path is not None:
                return kind, path
        return None

    @property
    def text_log(self) -> str | None:
        """The text log the run's lines come from: its `log`, else a W&B offline run's
        console output (`files/output.log`), else None (a TensorBoard or trackio run)."""
        if self.log is not None or self.wandb is None:
            return self.log
        return posixpath.join(wandb_files(self.wandb), "output.log")

    @property
    def watched(self) -> str:
        """The path whose changes say the run is writing: its log, else its tracker's."""
        text_log = self.text_log
        if text_log is not None:
            return text_log
        tracker = self.tracker
        assert tracker is not None  # validated: a run names a log or a tracker
        return tracker[1]


TRACKER_KEYS = ("tensorboard", "trackio", "wandb")


def wandb_files(directory: str) -> str:
    """The `files` directory of a W&B run: `directory` is the run's own (`offline-run-*`,
    `run-*`, `latest-run`), or the `wandb` directory, whose `latest-run` is the newest."""
    base = posixpath.basename(directory.rstrip("/"))
    if base.startswith(("offline-run-", "run-")) or base == "latest-run":
        return posixpath.join(directory, "files")
    return posixpath.join(directory, "latest-run", "files")


@dataclass(frozen=True)
class CheckpointConfig:
    """One `[[checkpoints]]` entry: a drafter directory on a host."""

    name: str
    host: str
    path: str
    baseline: bool = False
    step: int | None = None
    run: str | None = None


@dataclass(frozen=True)
class SuiteConfig:
    """One `[[suites]]` entry: a dflash-cache/1 directory to evaluate against."""

    name: str
    host: str
    cache: str
    imports: tuple[str, ...] = ()
    max_anchors: int | None = None
    device: str | None = None  # overrides the host's `device` for this suite
    # a SpecForge / speculators cache's head: the target model directory on the suite's host
    target: str | None = None
    cache_layer_ids: tuple[int, ...] | None = None  # which layers such a cache holds
    sliding: str | None = None  # harness --sliding: "bidirectional" | "causal" (None: its default)


SLIDING_MODES = (
    "bidirectional",
    "causal",
)  # docs/design.md "The block forward", the harness's --sliding


@dataclass(frozen=True)
class Config:
    """The whole, validated hosts.toml."""

    path: Path
    console: ConsoleConfig
    hosts: Mapping[str, HostConfig]
    runs: tuple[RunConfig, ...] = ()
    checkpoints: tuple[CheckpointConfig, ...] = ()
    suites: tuple[SuiteConfig, ...] = ()
    keys: Mapping[str, str] = field(default_factory=dict)
    stores: Mapping[str, StoreConfig] = field(default_factory=dict)
    line_index: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)
    # `[notify]` (core/notify_settings.py): URL templates, never expanded here
    notify: NotifySettings | None = None
    # The path as given with --config (or to load_config), None when found by default
    # ($DFLASH_TUI_CONFIG, ./hosts.toml): a command printed for the user must name it.
    given_as: str | None = field(default=None, compare=False, repr=False)

    def command(self, *words: str) -> str:
        """`dflash-tui WORDS` as the user must type it to act on this same config: with
        `--config PATH` when it was given so, quoted for a shell."""
        argv = ["dflash-tui", *words]
        if self.given_as:
            argv += ["--config", self.given_as]
        return shlex.join(argv)

    def host(self, name: str) -> HostConfig:
        """The host called `name`; KeyError with the known names otherwise."""
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(
                f"no host {name!r} in {self.path} (hosts: {', '.join(self.hosts)})"
            ) from None

    def run(self, name: str) -> RunConfig:
        for run in self.runs:
            if run.name == name:
                return run
        raise KeyError(
            f"no run {name!r} in {self.path} (runs: {', '.join(r.name for r in self.runs)})"
        )

    def problem(self, key: str, message: str) -> ConfigProblem:
        """A problem found after loading (e.g. an unknown key binding), with its line."""
        return ConfigProblem(self.path, key, message, self.line_index.get(key))


# --------------------------------------------------------------------------- locating


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--config`, else $DFLASH_TUI_CONFIG, else ./hosts.toml."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    return Path(DEFAULT_CONFIG_NAME)


def expand_local(value: str, base: Path) -> Path:
    """A local path from config: `~` expanded, relative ones against the file's folder."""
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else (base / path)
