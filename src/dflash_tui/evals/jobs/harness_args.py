"""The eval harness's command line for one job, and the check that its suite is on the host.

The console decides everything the harness is told (docs/design.md "The block forward"): the drafter
where the placement put it, the suite's cache and target, the device (always
explicit, so the harness fails rather than fall back to the CPU), the anchor
cap, the cache's layer ids and the sliding-window semantics of this job.
"""

from __future__ import annotations

from dflash_tui.core.config import Config, SuiteConfig
from dflash_tui.evals.jobs import gpus
from dflash_tui.evals.jobs.job import Job, JobError
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.pool import HostPool

# $1 the suite's cache: a dflash-cache/1, SpecForge or speculators layout (docs/evals.md "Caches");
# $2 its target model directory, when set (exit 3 when missing)
CACHE_CHECK = r"""if [ -n "$2" ] && ! { [ -f "$2/config.json" ] && { [ -f "$2/model.safetensors" ] || [ -f "$2/model.safetensors.index.json" ]; }; }; then exit 3; fi
[ -f "$1/manifest.json" ] && exit 0
for f in "$1"/rows_*/data_*.ckpt* "$1"/hs_*.safetensors "$1"/hidden_states/hs_*.safetensors "$1"/data_*.pt; do
  [ -f "$f" ] && exit 0
done
exit 1"""


def eval_args(
    config: Config, job: Job, suite: SuiteConfig, drafter_path: str, name: str
) -> tuple[str, ...]:
    """The harness arguments that score the drafter at `drafter_path` (on the job's host)
    on `suite`, its results named `name`."""
    args = ["--drafter", drafter_path, "--cache", suite.cache, "--suite", suite.name]
    args += ["--name", name]
    device = gpus.device(config, job.host, suite)
    args += ["--device", "cpu" if device == "cpu" else "cuda:0"]
    if suite.max_anchors:
        args += ["--max-anchors", str(suite.max_anchors)]
    if suite.target:
        args += ["--target", suite.target]
    if suite.cache_layer_ids:
        args += ["--cache-layer-ids", ",".join(map(str, suite.cache_layer_ids))]
    sliding = (
        job.sliding or suite.sliding
    )  # else the harness's default (docs/design.md "The block forward")
    if sliding:
        args += ["--sliding", sliding]
    return tuple(args)


async def check_suite_on_host(pool: HostPool, host: str, cache: str, target: str | None) -> None:
    """JobError unless `host` holds the suite's cache (any layout the harness reads) and,
    when the suite names one, its target model."""
    result = await pool.run(
        host, shell_script(CACHE_CHECK, cache, target or ""), timeout=30, check=False
    )
    if result.exit_status == 3:
        raise JobError(
            f"{host}:{target}: no target model there (config.json with "
            "model.safetensors or model.safetensors.index.json); check the suite's target "
            "(and --host): the harness reads embed_tokens and lm_head from it on this host"
        )
    if result.exit_status != 0:
        raise JobError(
            f"{host}:{cache}: no cache there (a dflash-cache/1 manifest.json, SpecForge "
            "rows_*/data_*.ckpt files or speculators hs_*.safetensors or data_*.pt files); "
            "check the suite's cache path (and --host)"
        )
