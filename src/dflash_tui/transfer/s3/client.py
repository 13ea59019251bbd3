"""One `[stores.NAME]` as an object store client: boto3, called from threads.

boto3 is imported only when a store is first used (`dflash-tui --help`,
`status` and the console start without it), and every blocking call runs on
this store's own small thread pool so the console's event loop never waits
on S3 and the relay's threads do not starve the default executor.

Credentials come only from the standard AWS chain (environment, the store's
`profile` in ~/.aws, an instance or container role); nothing here reads,
prints or stores them. Errors are worded from the service's error code and
the bucket/key, never from request details.
"""

from __future__ import annotations

import asyncio
import builtins  # `list` is also a method of S3Store: its annotations name the type here
import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from dflash_tui.core.config import StoreConfig
from dflash_tui.transfer.errors import ConnectionLost, TransferError

READ_CHUNK = 1 << 20
SHA256_METADATA = "sha256"  # x-amz-meta-sha256: the object's sha256, hex
MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
DENIED_CODES = {"AccessDenied", "403", "Forbidden", "AllAccessDisabled"}
CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
}
INSTALL_HINT = "pip install 'dflash-tui[s3]' (boto3)"


@dataclass(frozen=True)
class ObjectInfo:
    """One object: its key, size, ETag and the sha256 recorded in its metadata (if any)."""

    key: str
    size: int
    etag: str
    sha256: str | None = None
    modified: float = 0.0  # LastModified, seconds since the epoch


def credentials_hint(store: StoreConfig) -> str:
    profile = f"profile {store.profile!r} in ~/.aws" if store.profile else "AWS_PROFILE"
    return (
        "credentials come from the standard AWS chain: AWS_ACCESS_KEY_ID and "
        f"AWS_SECRET_ACCESS_KEY in the environment, {profile}, or an instance role"
    )


class S3Store:
    """The S3 client for one store; `call` runs one API operation off the event loop."""

    def __init__(self, config: StoreConfig, *, threads: int = 8) -> None:
        self.config = config
        self.name = config.name
        self._client: Any = None
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix=f"s3-{config.name}")

    # ------------------------------------------------------------------ keys

    def key(self, path: str) -> str:
        """The object key of `path` (relative to the store's prefix)."""
        path = path.strip("/")
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise TransferError(
                f"{self.name}:{path}: '..' is not allowed in a store path", kind="usage"
            )
        return "/".join(p for p in (self.config.prefix, *parts) if p)

    def label(self, key: str) -> str:
        """`store:path` for a key, as the user writes it."""
        prefix = self.config.prefix
        rel = key[len(prefix) :].lstrip("/") if prefix and key.startswith(prefix) else key
        return f"{self.name}:{rel}"

    def url(self, key: str) -> str:
        return f"s3://{self.config.bucket}/{key}"

    # ------------------------------------------------------------------ calling

    def _make_client(self) -> Any:
        try:
            import boto3
            from botocore.config import Config as BotoConfig
        except ImportError:
            raise TransferError(
                f"store {self.name}: the S3 client is not installed; {INSTALL_HINT}",
                kind="usage",
            ) from None
        c = self.config
        try:
            session = boto3.session.Session(profile_name=c.profile, region_name=c.region)
        except Exception as exc:  # ProfileNotFound and friends
            raise TransferError(f"store {self.name}: {exc}", kind="credentials") from None
        return session.client(
            "s3",
            endpoint_url=c.endpoint_url,
            config=BotoConfig(
                retries={"max_attempts": 5, "mode": "standard"},
                max_pool_connections=16,
                connect_timeout=10,
                read_timeout=60,
                # The relay sends its own SHA-256 per part; no extra CRC32 per request.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def _sync(self, operation: str, kwargs: dict[str, Any]) -> Any:
        if self._client is None:
            self._client = self._make_client()
        try:
            return getattr(self._client, operation)(**kwargs)
        except Exception as exc:
            raise self.describe(exc, kwargs.get("Key") or kwargs.get("Prefix")) from None

    async def call(self, operation: str, **kwargs: Any) -> Any:
        """Run one S3 operation (`get_object`, `put_object`, ...) on this store's bucket."""
        kwargs.setdefault("Bucket", self.config.bucket)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._executor, functools.partial(self._sync, operation, kwargs)
        )

    async def run(self, fn: Callable[[], Any]) -> Any:
        """Run a blocking function (reading a body, hashing) on this store's threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._guard(fn))

    def _guard(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        def guarded() -> Any:
            try:
                return fn()
            except TransferError:
                raise
            except Exception as exc:
                raise self.describe(exc, None) from None

        return guarded

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None

    def describe(self, exc: BaseException, key: str | None) -> TransferError:
        """A TransferError for a boto3/botocore exception, naming store, bucket and key."""
        where = self.url(key) if key else f"s3://{self.config.bucket}"
        where = f"{self.name} ({where})"
        name = type(exc).__name__
        if name in ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"):
            return TransferError(
                f"store {self.name}: no usable AWS credentials; {credentials_hint(self.config)}",
                kind="credentials",
            )
        if name == "ProfileNotFound":
            return TransferError(f"store {self.name}: {exc}", kind="credentials")
        if name in (
            "EndpointConnectionError",
            "ConnectTimeoutError",
            "ReadTimeoutError",
            "ConnectionClosedError",
            "ProtocolError",
            "IncompleteReadError",
            "ResponseStreamingError",
            "ConnectionError",
        ):
            return ConnectionLost(f"store {self.name}", f"connection lost ({name})")
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            error = response.get("Error", {})
            code = str(error.get("Code", ""))
            message = str(error.get("Message", "")) or code
            if code == "NoSuchBucket":
                return TransferError(f"{where}: no such bucket", kind="missing")
            if code in MISSING_CODES:
                return TransferError(f"{where}: no such object", kind="missing")
            if code == "NoSuchUpload":
                return TransferError(f"{where}: the multipart upload is gone", kind="no_upload")
            if code in DENIED_CODES:
                return TransferError(f"{where}: access denied ({code})", kind="permission")
            if code in CREDENTIAL_CODES:
                return TransferError(
                    f"store {self.name}: the credentials were refused ({code}); "
                    f"{credentials_hint(self.config)}",
                    kind="credentials",
                )
            if code in ("PreconditionFailed", "412"):
                return TransferError(
                    f"{where}: the object changed during the transfer; run again to start over",
                    kind="changed",
                )
            if code in ("SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout"):
                return ConnectionLost(f"store {self.name}", f"{code}: {message}")
            return TransferError(f"{where}: {code}: {message}", kind="failed")
        return TransferError(f"{where}: {name}: {exc}", kind="failed")

    # ------------------------------------------------------------------ operations

    async def head(self, key: str) -> ObjectInfo | None:
        """The object at `key`, or None when there is none."""
        try:
            out = await self.call("head_object", Key=key)
        except TransferError as exc:
            if exc.kind == "missing":
                return None
            raise
        meta = {k.lower(): v for k, v in (out.get("Metadata") or {}).items()}
        return ObjectInfo(key, int(out["ContentLength"]), out.get("ETag", ""), meta.get("sha256"))

    async def check_bucket(self) -> float:
        """Seconds one HeadBucket took; TransferError when the bucket is missing, the
        credentials are refused or the endpoint does not answer. A 403 (a policy that
        grants objects under the prefix but not HeadBucket) still counts as an answer."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await self.call("head_bucket")
        except TransferError as exc:
            if exc.kind == "permission":
                return loop.time() - started
            if exc.kind == "missing":
                raise TransferError(
                    f"store {self.name}: no such bucket {self.config.bucket!r}"
                    + (f" at {self.config.endpoint_url}" if self.config.endpoint_url else "")
                    + f"; check `url` in [stores.{self.name}]",
                    kind="missing",
                ) from None
            raise
        return loop.time() - started

    async def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with `prefix` (paginated)."""
        found: list[ObjectInfo] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            out = await self.call("list_objects_v2", **kwargs)
            for item in out.get("Contents", []) or []:
                stamp = item.get("LastModified")
                found.append(
                    ObjectInfo(
                        item["Key"],
                        int(item["Size"]),
                        item.get("ETag", ""),
                        modified=stamp.timestamp() if stamp is not None else 0.0,
                    )
                )
            if not out.get("IsTruncated"):
                return found
            token = out.get("NextContinuationToken")

    async def has_prefix(self, prefix: str) -> bool:
        out = await self.call("list_objects_v2", Prefix=prefix, MaxKeys=1)
        return bool(out.get("Contents"))

    async def read_range(
        self, key: str, offset: int, length: int, *, etag: str | None = None, digest: Any = None
    ) -> AsyncIterator[bytes]:
        """Bytes [offset, offset + length) of an object, streamed in chunks (ranged GET).

        With `etag`, a changed object fails the request instead of mixing versions.
        With `digest` (a hashlib object), each chunk is hashed on the store's thread
        as it is read, off the event loop.
        """
        if length <= 0:
            return
        kwargs: dict[str, Any] = {"Key": key, "Range": f"bytes={offset}-{offset + length - 1}"}
        if etag:
            kwargs["IfMatch"] = etag
        out = await self.call("get_object", **kwargs)
        body = out["Body"]
        try:
            left = length
            while left > 0:
                chunk = await self.run(
                    functools.partial(_read, body, min(READ_CHUNK, left), digest)
                )
                if not chunk:
                    raise ConnectionLost(
                        f"store {self.name}", f"{self.url(key)}: the download ended early"
                    )
                left -= len(chunk)
                yield chunk
        finally:
            with contextlib.suppress(Exception):
                body.close()

    async def read_bytes(self, key: str, offset: int, length: int) -> bytes:
        """A small range of an object, in one piece."""
        parts = [chunk async for chunk in self.read_range(key, offset, length)]
        return b"".join(parts)

    async def pending_uploads(self, prefix: str) -> builtins.list[dict[str, Any]]:
        """Multipart uploads started under `prefix` and neither completed nor aborted."""
        found: builtins.list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"Prefix": prefix}
        while True:
            out = await self.call("list_multipart_uploads", **kwargs)
            found.extend(out.get("Uploads", []) or [])
            if not out.get("IsTruncated"):
                return found
            kwargs["KeyMarker"] = out.get("NextKeyMarker")
            kwargs["UploadIdMarker"] = out.get("NextUploadIdMarker")

    async def list_parts(self, key: str, upload_id: str) -> dict[int, tuple[str, int]]:
        """Parts of a pending upload: part number -> (ETag, size)."""
        parts: dict[int, tuple[str, int]] = {}
        kwargs: dict[str, Any] = {"Key": key, "UploadId": upload_id}
        while True:
            out = await self.call("list_parts", **kwargs)
            for part in out.get("Parts", []) or []:
                parts[int(part["PartNumber"])] = (part["ETag"], int(part["Size"]))
            if not out.get("IsTruncated"):
                return parts
            kwargs["PartNumberMarker"] = out.get("NextPartNumberMarker")

    async def abort(self, key: str, upload_id: str) -> None:
        """Abort a pending multipart upload (its parts are freed); gone already is fine."""
        try:
            await self.call("abort_multipart_upload", Key=key, UploadId=upload_id)
        except TransferError as exc:
            if exc.kind not in ("no_upload", "missing"):
                raise


def _read(body: Any, n: int, digest: Any) -> bytes:
    chunk = body.read(n)
    if digest is not None and chunk:
        digest.update(chunk)
    return chunk
