"""Cache builds as jobs (docs/evals.md "Building a cache"): what `dflash-tui cache build` checks and sends.

A cache build runs like an eval job (detached on the suite's host, followed by
the same poll, cancelled the same way), with the cache builder installed next
to the harness (`~/.cache/dflash-tui/cachebuild/<sha256>/`) and run with the
host's python, which needs the `cache` extra (transformers). This module turns
the command's arguments into a checked `CacheBuildRequest` before anything is
queued, uploads the prompts file (content-addressed, atomic) and builds the
builder's argument list; the JobManager does the rest. With `--dataset` instead
of `--prompts` nothing is uploaded: the builder reads the dataset on the host
(docs/evals.md "The protocol").
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dflash_tui.core.config import Config, SuiteConfig
from dflash_tui.remote.command import shell_script
from dflash_tui.remote.errors import CommandFailed, RemoteError
from dflash_tui.remote.pool import HostPool
from dflash_tui.shipped.cachebuild.datasets import DATASETS, ZLAB_MAX_NEW_TOKENS

DEFAULT_MAX_NEW_TOKENS = 512  # --prompts builds; --dataset builds default to z-lab's 2048
DATASET_NAMES = tuple(DATASETS)
TARGET_PREFIX = "target:"  # a cache job's `checkpoint` column: target:<model dir name>


class CacheBuildError(Exception):
    """A cache build that cannot start; `exit_code` 2 for bad usage, 1 otherwise."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class DatasetChoice:
    """`--dataset NAME [--data PATH] [--max-samples N | --num-prompts N] [--thinking]`."""

    name: str
    data: str | None = None  # on the build host; None: its datasets.load_dataset
    max_samples: int | None = None
    num_prompts: int | None = None
    thinking: bool = False

    def args(self) -> tuple[str, ...]:
        out: list[str] = ["--dataset", self.name]
        for flag, value in (
            ("--data", self.data),
            ("--max-samples", self.max_samples),
            ("--num-prompts", self.num_prompts),
        ):
            if value is not None:
                out += [flag, str(value)]
        return (*out, "--thinking") if self.thinking else tuple(out)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "data": self.data,
            "max_samples": self.max_samples,
            "num_prompts": self.num_prompts,
            "thinking": self.thinking,
        }


def default_max_new_tokens(dataset: DatasetChoice | None) -> int:
    """z-lab's 2048 for a --dataset build, else the --prompts default."""
    return ZLAB_MAX_NEW_TOKENS if dataset is not None else DEFAULT_MAX_NEW_TOKENS


@dataclass(frozen=True)
class CacheBuildRequest:
    """A checked cache build: where, from what, into which directory."""

    suite: str
    host: str
    target: str  # the model directory on `host`
    out: str  # the suite's cache path on `host`
    prompts: bytes | None  # the JSONL file's content (None: from `dataset`)
    prompts_name: str
    max_new_tokens: int
    layer_ids: tuple[int, ...]
    dataset: DatasetChoice | None = None

    @property
    def prompts_sha256(self) -> str:
        return hashlib.sha256(self.prompts or b"").hexdigest()

    @property
    def label(self) -> str:
        return TARGET_PREFIX + (posixpath.basename(self.target.rstrip("/")) or self.target)

    def args(self, prompts_path: str | None, device: str) -> tuple[str, ...]:
        """The builder's arguments (the runner adds `--summary FILE` in the job directory)."""
        if self.dataset is not None:
            source = self.dataset.args()
        else:
            assert prompts_path is not None, "a --prompts build sends its uploaded file"
            source = ("--prompts", prompts_path)
        return (
            "--target",
            self.target,
            *source,
            "--out",
            self.out,
            "--target-layer-ids",
            ",".join(map(str, self.layer_ids)),
            "--max-new-tokens",
            str(self.max_new_tokens),
            "--device",
            device,
        )


def split_location(text: str, config: Config, what: str) -> tuple[str | None, str]:
    """`host:path` -> (host, path); a path alone -> (None, path). Unknown hosts are usage errors."""
    host, sep, path = text.partition(":")
    if sep and "/" not in host and host:
        if host not in config.hosts:
            raise CacheBuildError(
                f"{what} {text}: no host {host!r} in {config.path} "
                f"(hosts: {', '.join(config.hosts)})"
            )
        if not path:
            raise CacheBuildError(f"{what} {text}: no directory after {host}:")
        return host, path
    return None, text


def check_prompts(data: bytes, name: str) -> None:
    """A quick local check of the prompts file, so a typo fails here, not on the host."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CacheBuildError(f"--prompts {name}: not UTF-8 text") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise CacheBuildError(f"--prompts {name}: no prompts in it")
    for number, line in lines:
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CacheBuildError(
                f"--prompts {name}, line {number}: not JSON ({exc.msg})"
            ) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise CacheBuildError(
                f'--prompts {name}, line {number}: expected {{"name": ..., "prompt": ...}} or '
                '{"name": ..., "input_ids": [...]}'
            )
        if not any(k in obj for k in ("prompt", "messages", "input_ids")):
            raise CacheBuildError(
                f'--prompts {name}, line {number}: needs "prompt", "messages" or "input_ids"'
            )


def layer_ids_of(config_json: str, where: str) -> tuple[int, ...]:
    """`target_layer_ids` of a drafter's config.json text."""
    try:
        raw = json.loads(config_json)
    except json.JSONDecodeError as exc:
        raise CacheBuildError(f"--drafter {where}: config.json is not JSON ({exc.msg})") from None
    nested = raw.get("dflash_config") if isinstance(raw, dict) else None
    ids = (nested or {}).get("target_layer_ids", (raw or {}).get("target_layer_ids"))
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
        raise CacheBuildError(
            f"--drafter {where}: config.json has no target_layer_ids list; pass --target-layer-ids"
        )
    return tuple(ids)


async def read_remote_text(pool: HostPool, host: str, path: str, what: str) -> str:
    result = await pool.run(host, shell_script('cat -- "$1"', path), timeout=30, check=False)
    if result.exit_status != 0:
        raise CacheBuildError(f"{what} {host}:{path}: cannot read it ({result.stderr.strip()})")
    return result.stdout


async def plan_cache_build(
    pool: HostPool,
    config: Config,
    suite: SuiteConfig,
    *,
    target: str,
    prompts: Path | None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    layer_ids: tuple[int, ...] | None = None,
    drafter: str | None = None,
    host: str | None = None,
    dataset: DatasetChoice | None = None,
) -> CacheBuildRequest:
    """Check everything that can be checked before queueing; CacheBuildError says what is wrong."""
    build_host = host or suite.host
    if build_host not in config.hosts:
        raise CacheBuildError(f"no host {build_host!r} in {config.path}")
    if config.host(build_host).scheduler != "ssh":
        raise CacheBuildError(
            f"{build_host} runs jobs through {config.host(build_host).scheduler}; cache builds "
            "run only on hosts without a scheduler for now (pass --host)"
        )
    target_host, target_dir = split_location(target, config, "--target")
    if target_host is None:
        raise CacheBuildError(f"--target {target}: expected HOST:DIR (the model on the build host)")
    if target_host != build_host:
        raise CacheBuildError(
            f"--target {target}: the model must be on {build_host}, where suite {suite.name}'s "
            f"cache is built; copy it there first (dflash-tui relay {target} "
            f"{build_host}:DIR), or pass --host {target_host}"
        )
    if max_new_tokens < 1:
        raise CacheBuildError(f"--max-new-tokens must be positive, got {max_new_tokens}")
    data: bytes | None = None
    if (prompts is None) == (dataset is None):
        raise CacheBuildError("give either --prompts FILE or --dataset NAME")
    if dataset is not None:
        dataset = check_dataset(dataset, config, build_host)
    else:
        assert prompts is not None
        try:
            data = Path(prompts).read_bytes()
        except OSError as exc:
            raise CacheBuildError(
                f"--prompts {prompts}: cannot read it ({exc.strerror or exc})"
            ) from None
        check_prompts(data, str(prompts))
    if layer_ids is None and drafter is None:
        raise CacheBuildError("pass --target-layer-ids (e.g. 1,16,31) or --drafter HOST:DIR")
    if drafter is not None:
        d_host, d_dir = split_location(drafter, config, "--drafter")
        path = posixpath.join(d_dir, "config.json") if d_host else str(Path(d_dir) / "config.json")
        try:
            text = (
                await read_remote_text(pool, d_host, path, "--drafter")
                if d_host
                else Path(path).read_text()
            )
        except OSError as exc:
            raise CacheBuildError(f"--drafter {drafter}: cannot read {path} ({exc})") from None
        from_drafter = layer_ids_of(text, drafter)
        if layer_ids is not None and tuple(layer_ids) != from_drafter:
            raise CacheBuildError(
                f"--target-layer-ids {','.join(map(str, layer_ids))} differs from the drafter's "
                f"{list(from_drafter)}; drop one of them"
            )
        layer_ids = from_drafter
    assert layer_ids is not None
    try:
        check = await pool.run(
            build_host,
            shell_script('[ -f "$1/config.json" ]', target_dir),
            timeout=30,
            check=False,
        )
    except RemoteError as exc:
        raise CacheBuildError(f"cannot check --target on {build_host}: {exc}", 1) from None
    if check.exit_status != 0:
        raise CacheBuildError(
            f"--target {target}: no config.json there (not a Hugging Face model directory)"
        )
    if dataset is not None and dataset.data is not None:
        await _check_data_on_host(pool, build_host, dataset.data)
    return CacheBuildRequest(
        suite=suite.name,
        host=build_host,
        target=target_dir,
        out=suite.cache,
        prompts=data,
        prompts_name=Path(prompts).name if prompts is not None else "",
        max_new_tokens=max_new_tokens,
        layer_ids=tuple(layer_ids),
        dataset=dataset,
    )


def check_dataset(dataset: DatasetChoice, config: Config, build_host: str) -> DatasetChoice:
    """The name is one of z-lab's; `--data` is an absolute path, on the build host."""
    if dataset.name not in DATASETS:
        raise CacheBuildError(
            f"--dataset {dataset.name}: not one of z-lab's ({', '.join(DATASET_NAMES)})"
        )
    if dataset.max_samples is not None and dataset.num_prompts is not None:
        raise CacheBuildError("--max-samples and --num-prompts are two protocols: give one")
    if dataset.data is None:
        return dataset
    data_host, path = split_location(dataset.data, config, "--data")
    if data_host not in (None, build_host):
        raise CacheBuildError(
            f"--data {dataset.data}: the rows are read on {build_host}, where the cache is "
            f"built; copy the file there first (dflash-tui relay {dataset.data} "
            f"{build_host}:PATH)"
        )
    if not path.startswith("/"):
        raise CacheBuildError(f"--data {dataset.data}: give the absolute path on {build_host}")
    return DatasetChoice(
        dataset.name, path, dataset.max_samples, dataset.num_prompts, dataset.thinking
    )


async def _check_data_on_host(pool: HostPool, host: str, path: str) -> None:
    try:
        check = await pool.run(host, shell_script('[ -e "$1" ]', path), timeout=30, check=False)
    except RemoteError as exc:
        raise CacheBuildError(f"cannot check --data on {host}: {exc}", 1) from None
    if check.exit_status != 0:
        raise CacheBuildError(
            f"--data {host}:{path}: no such file or folder there (a .parquet or .jsonl file, "
            "or a datasets save_to_disk folder)"
        )


# $1 sha256 of the prompts; stdin: the file. Prints its absolute path on the host.
UPLOAD_PROMPTS_SCRIPT = r"""base="$HOME/.cache/dflash-tui/prompts"
f="$base/$1.jsonl"
if [ -f "$f" ]; then cat >/dev/null; printf '%s\n' "$f"; exit 0; fi
mkdir -p "$base" || exit 3
t=$(mktemp "$base/.$1.XXXXXX") || exit 3
cat > "$t" || { rm -f "$t"; exit 3; }
got=$(sha256sum < "$t" | cut -d' ' -f1)
[ "$got" = "$1" ] || { rm -f "$t"; echo "E the prompts arrived damaged" >&2; exit 4; }
chmod 644 "$t" && mv -f "$t" "$f" || { rm -f "$t"; exit 3; }
printf '%s\n' "$f"
"""


async def upload_prompts(pool: HostPool, request: CacheBuildRequest) -> str:
    """Put the prompts on the build host under their sha256; returns their absolute path."""
    result = await pool.run(
        request.host,
        shell_script(UPLOAD_PROMPTS_SCRIPT, request.prompts_sha256),
        input=request.prompts,
        encoding=None,
        timeout=120,
        check=False,
    )
    out = result.stdout.decode("utf-8", "replace").strip()
    if result.exit_status != 0 or not out.startswith("/"):
        err = result.stderr.decode("utf-8", "replace").strip()
        raise CommandFailed(request.host, "upload the prompts", result.exit_status, err or out)
    return out
