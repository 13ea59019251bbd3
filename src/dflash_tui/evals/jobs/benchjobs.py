"""Served bench jobs: the settings a bench is started with, and the served bench's arguments.

A bench job is an eval job's twin (same preflight, placement, detached run, poll,
cancel and collection) whose program is `shipped/servedbench/` instead of the
harness: it starts the host's engine with the suite's target and the checkpoint
as its drafter and measures served tau and speedup on the suite's prompts
(docs/evals.md "Served bench jobs"). Its settings travel in the job's `options`
column, so another console continuing the job starts the same bench.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from dflash_tui.core.config import Config, SuiteConfig
from dflash_tui.evals.jobs.job import Job, JobError

ENGINES = ("vllm", "sglang")
SERVED_FILE = "served_results.json"  # the bench's results file in its job directory
# Where a host keeps its target-alone runs for later benches (shipped/servedbench/baselines.py).
BASELINE_STORE = "~/.cache/dflash-tui/baselines"
# What runs when hosts.toml names no engine command for the host.
DEFAULT_COMMANDS = {
    "vllm": ("vllm",),
    "sglang": ("python3", "-m", "sglang.launch_server"),
}


@dataclass(frozen=True)
class BenchOptions:
    """What `dflash-tui bench` was asked for (None: the program's default)."""

    engine: str = "vllm"
    k: int | None = None  # draft tokens per step (default: the drafter's block size - 1)
    concurrency: tuple[int, ...] = (1,)  # requests in flight; several: a sweep, each in turn
    port: int | None = None  # loopback port on the host (default: a free one)
    health_timeout_s: float | None = None
    rounds: int | None = None  # timed rounds per task and engine (default: the program's)
    fresh_baseline: bool = False  # measure the target alone again instead of reusing it

    def check(self) -> None:
        """JobError (exit 2) for a setting no bench can run with."""
        if self.engine not in ENGINES:
            raise JobError(f"--engine expects one of {', '.join(ENGINES)}; got {self.engine!r}", 2)
        if self.k is not None and self.k < 1:
            raise JobError(f"--k expects a positive number of draft tokens; got {self.k}", 2)
        if not self.concurrency or min(self.concurrency) < 1:
            raise JobError(f"--concurrency expects levels of at least 1; got {self.levels}", 2)
        if len(set(self.concurrency)) != len(self.concurrency):
            raise JobError(f"--concurrency names a level twice: {self.levels}", 2)
        if self.rounds is not None and self.rounds < 1:
            raise JobError(f"--rounds expects at least 1; got {self.rounds}", 2)
        if self.port is not None and not 0 < self.port < 65536:
            raise JobError(f"--port expects 1..65535; got {self.port}", 2)

    @property
    def levels(self) -> str:
        """The concurrency levels as the command line takes them: `1,4,16`."""
        return ",".join(str(c) for c in self.concurrency)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def of(cls, job: Job) -> BenchOptions:
        raw = json.loads(job.options) if job.options else {}
        conc = raw.get("concurrency", 1)  # one int in jobs started before the sweep
        raw["concurrency"] = tuple(conc) if isinstance(conc, list) else (int(conc),)
        return cls(**{k: v for k, v in raw.items() if k in cls.__dataclass_fields__})


def engine_command(config: Config, host: str, engine: str) -> tuple[str, ...]:
    """The host's engine command (`[hosts.X] vllm`/`sglang`), else the engine's usual name."""
    configured: tuple[str, ...] | None = getattr(config.host(host), engine)
    return configured or DEFAULT_COMMANDS[engine]


def bench_args(config: Config, job: Job, suite: SuiteConfig, drafter_path: str) -> tuple[str, ...]:
    """The served bench's arguments for `job` (its runner adds `--out served_results.json`)."""
    opts = BenchOptions.of(job)
    args = ["--engine", opts.engine, "--cache", suite.cache, "--drafter", drafter_path]
    args += ["--engine-command", json.dumps(list(engine_command(config, job.host, opts.engine)))]
    args += ["--concurrency", opts.levels]
    if suite.target:
        args += ["--target", suite.target]
    if opts.k is not None:
        args += ["--k", str(opts.k)]
    if opts.port is not None:
        args += ["--port", str(opts.port)]
    if opts.rounds is not None:
        args += ["--rounds", str(opts.rounds)]
    args += ["--baseline-store", BASELINE_STORE]
    if opts.fresh_baseline:
        args.append("--fresh-baseline")
    if opts.health_timeout_s is not None:
        args += ["--health-timeout", str(opts.health_timeout_s)]
    return tuple(args)
