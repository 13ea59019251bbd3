"""`fetch hf:ORG/NAME host:PATH`: a Hub download run on the destination host, verified.

The host downloads with its own python and huggingface_hub (hub_script.py),
so the bytes go straight from the Hub (or `[console] hf_endpoint`, a mirror)
to the host. The console's HF_TOKEN travels on the command's stdin only.
When the Hub cannot serve (gated, unauthorised, missing, down), the error
says which, where access is requested and what to set, and `fetch` names
the next source it found: a copy with the same name on a host or in a store
(by `locate`; identical copies share a fingerprint). `--any` takes it with
a verified relay.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from dflash_tui.remote.errors import RemoteError
from dflash_tui.remote.pool import HostPool
from dflash_tui.transfer.endpoints import Endpoint, parse_endpoint
from dflash_tui.transfer.errors import TransferError
from dflash_tui.transfer.events import TransferEvent
from dflash_tui.transfer.hub.script import SCRIPT

HUB = "https://huggingface.co"
TOKEN_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
SERVE_ERRORS = (
    "gated",
    "unauthorized",
    "forbidden",
    "missing",
    "revision",
    "unavailable",
    "unreachable",
)


@dataclass(frozen=True)
class HubFile:
    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class FetchResult:
    """What `fetch` did: from the Hub (`commit`), or from another copy (`source`)."""

    repo: str
    dst: str
    via: str  # "hub" or "copy"
    commit: str | None = None
    files: list[HubFile] = field(default_factory=list)
    bytes_total: int = 0
    source: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "dst": self.dst,
            "via": self.via,
            "commit": self.commit,
            "files": [f.__dict__ for f in self.files],
            "bytes_total": self.bytes_total,
            "source": self.source,
        }


class HubError(TransferError):
    """The Hub could not serve the repo; `alternative` names a copy found elsewhere."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status: int = 0,
        hint: str = "",
        alternative: str | None = None,
    ) -> None:
        super().__init__(message, kind=kind)
        self.status = status
        self.hint = hint
        self.alternative = alternative


def hub_token() -> str | None:
    """The console's token (HF_TOKEN), or None: the host's own login then applies."""
    for name in TOKEN_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def parse_repo(word: str) -> str:
    if not word.startswith("hf:"):
        raise TransferError(f"{word!r}: the source must be hf:ORG/NAME", kind="usage")
    repo = word[3:].strip("/")
    parts = repo.split("/")
    if len(parts) != 2 or not all(parts) or any(p in (".", "..") for p in parts):
        raise TransferError(f"{word!r}: expected hf:ORG/NAME", kind="usage")
    return repo


def explain(
    repo: str, kind: str, status: int, endpoint: str, revision: str | None, token: bool
) -> tuple[str, str]:
    """(message, hint) for a Hub refusal, saying which and what to do."""
    page = f"{endpoint.rstrip('/')}/{repo}"
    tokens = f"{endpoint.rstrip('/')}/settings/tokens"
    sent = "with the token from HF_TOKEN" if token else "without a token (HF_TOKEN is not set)"
    if kind == "gated":
        return (
            f"hf:{repo} is a gated repo: the Hub refused the download ({status or 403}) {sent}",
            f"request access at {page} with your account, then set HF_TOKEN to a token of that "
            f"account (create one at {tokens})",
        )
    if kind == "unauthorized":
        return (
            f"hf:{repo}: unauthorised (401) {sent}: the repo is private or gated, or does not exist",
            f"set HF_TOKEN to a token with access (create one at {tokens}); check the name at {page}",
        )
    if kind == "forbidden":
        return (
            f"hf:{repo}: forbidden (403) {sent}",
            f"the token lacks read access to {page}; set HF_TOKEN to one that has it",
        )
    if kind == "missing":
        return (
            f"hf:{repo}: no such repo on {endpoint} (404)",
            f"check the name at {page}" + ("" if token else "; a private repo needs HF_TOKEN"),
        )
    if kind == "revision":
        return (
            f"hf:{repo}: no revision {revision!r} (404)",
            f"see the branches and tags at {page}",
        )
    if kind == "unavailable":
        return (
            f"hf:{repo}: the Hub cannot serve now ({status})",
            "try again later, or use a mirror: [console] hf_endpoint",
        )
    return (
        f"hf:{repo}: the host cannot reach {endpoint}",
        "the host needs network access to the Hub, or set [console] hf_endpoint to a mirror it reaches",
    )


async def fetch(
    pool: HostPool,
    state_conn: sqlite3.Connection,
    source: str,
    destination: str,
    *,
    revision: str | None = None,
    any_source: bool = False,
    force: bool = False,
    token: str | None = None,
    on_event: Callable[[TransferEvent], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    find_copy: Callable[[str], Awaitable[str | None]] | None = None,
) -> FetchResult:
    """Download hf:ORG/NAME onto a host (verified, `.part` until complete).

    Raises HubError when the Hub cannot serve and no copy is taken (its
    `alternative` names one when found), TransferError for other failures.
    """
    repo = parse_repo(source)
    dst = parse_endpoint(destination, list(pool.config.hosts))
    if dst.is_local or dst.host is None:
        raise TransferError("fetch downloads on a host: give host:PATH", kind="usage")
    endpoint = pool.config.console.hf_endpoint or HUB
    final = await _final_path(pool, dst, repo)
    python = pool.config.host(dst.host).python
    argv = [
        python,
        "-c",
        SCRIPT,
        repo,
        revision or "",
        final,
        pool.config.console.hf_endpoint or "",
        "1" if force else "0",
    ]
    answer = await _run_script(pool, dst.host, argv, token, python, on_progress)
    where = f"{dst.host}:{final}"
    if answer.get("ok"):
        files = [HubFile(f["path"], int(f["size"]), f["sha256"]) for f in answer.get("files", [])]
        return FetchResult(
            repo, where, "hub", answer.get("commit"), files, int(answer.get("bytes", 0))
        )
    kind = str(answer.get("error", "failed"))
    status = int(answer.get("status") or 0)
    if kind not in SERVE_ERRORS:
        hint = "use --force to replace it" if kind == "exists" else ""
        raise HubError(
            f"{where}: {answer.get('message', kind)}", kind=kind, status=status, hint=hint
        )
    message, hint = explain(repo, kind, status, endpoint, revision, token is not None)
    # another copy by name (`checkpoints.best_copy`, given by the caller: the checkpoint
    # search sits above the transfer layer)
    alternative = await find_copy(repo.split("/")[1]) if find_copy is not None else None
    if alternative is None or not any_source:
        if alternative is not None:
            hint += (
                f"; a copy with the same name is at {alternative}: run again with --any to take it"
            )
        raise HubError(message, kind=kind, status=status, hint=hint, alternative=alternative)
    from dflash_tui.transfer.dispatch import relay

    result = await relay(
        pool, state_conn, alternative, Endpoint(dst.host, final), on_event=on_event
    )
    files = [HubFile(f.path, f.size, f.sha256_dst) for f in result.files]
    return FetchResult(repo, result.dst, "copy", None, files, result.bytes_total, alternative)


async def _final_path(pool: HostPool, dst: Endpoint, repo: str) -> str:
    """cp rules: into an existing directory under the repo's name, else PATH is the name."""
    assert dst.host is not None
    out = await pool.run(dst.host, ["test", "-d", dst.path], check=False)
    if out.exit_status == 0:
        return posixpath.join(dst.path, repo.split("/")[1])
    if dst.path.endswith("/"):
        raise TransferError(f"{dst}: no such directory", kind="missing")
    return dst.path


async def _run_script(
    pool: HostPool,
    host: str,
    argv: list[str],
    token: str | None,
    python: str,
    on_progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    """Run the script with the token on stdin; progress lines as they come, then the answer.

    The remote process group is killed if this is cancelled (the .part stays
    and a rerun continues it).
    """
    answer: dict[str, Any] | None = None
    err = ""
    try:
        async with pool.stream(host, argv, encoding="utf-8") as proc:
            proc.stdin.write((token or "") + "\n")
            proc.stdin.write_eof()
            errors = asyncio.ensure_future(proc.stderr.read())
            try:
                async for line in proc.stdout:
                    try:
                        value = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if not isinstance(value, dict):
                        continue
                    if "ok" in value:
                        answer = value
                    elif "progress" in value and on_progress is not None:
                        on_progress(int(value["progress"]), int(value.get("total") or 0))
                err = await errors
            finally:
                errors.cancel()
            await proc.wait()
    except RemoteError as exc:
        raise TransferError(str(exc), kind="unreachable") from None
    if answer is not None:
        return answer
    detail = " | ".join(str(err).strip().splitlines()[-3:])
    raise TransferError(f"{host}: the download with {python} failed ({detail or 'no output'})")
