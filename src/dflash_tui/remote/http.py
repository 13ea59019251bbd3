"""A plain HTTP/1.0 GET through a host's SSH connection (for a server's /metrics).

The request travels in a direct-tcpip channel of the host's pooled connection
(`HostPool.tcp`), so the address is the one the host sees (127.0.0.1 is the
host itself): nothing is installed there and no port is opened anywhere.

Deliberately small: one GET, `Connection: close`, the body read to the end of
the stream (HTTP/1.0), under a deadline and a size bound. A redirect to a path
on the same server is followed (up to MAX_REDIRECTS); a chunked or gzipped
answer, which an HTTP/1.0 request should not get, is decoded anyway.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from urllib.parse import urljoin, urlsplit

from dflash_tui.core import units
from dflash_tui.remote.errors import EndpointFailed, RemoteError
from dflash_tui.remote.pool import TRANSPORT_ERRORS, HostPool

TIMEOUT_S = 10.0
MAX_BYTES = 16 << 20
"""A vLLM /metrics page is tens to hundreds of KB; anything past this is refused."""
MAX_REDIRECTS = 3
_HEADER_LIMIT = 64 * 1024


def _authority(address: str, port: int) -> str:
    host = f"[{address}]" if ":" in address else address
    return host if port == 80 else f"{host}:{port}"


async def http_get(
    pool: HostPool,
    host: str,
    address: str,
    port: int,
    path: str,
    *,
    timeout_s: float = TIMEOUT_S,
    max_bytes: int = MAX_BYTES,
) -> bytes:
    """The body of `GET http://address:port/path` as host `host` reaches it.

    Raises EndpointFailed (a status other than 200, no answer within `timeout_s`, a
    body over `max_bytes`, an answer that is not HTTP), TunnelFailed (nothing listens
    there as the host sees it, or its sshd forbids forwarding), or the pool's own
    errors when the host itself is not reached.
    """
    url = f"http://{_authority(address, port)}{path}"
    try:
        return await asyncio.wait_for(
            _follow(pool, host, address, port, path, max_bytes), timeout_s
        )
    except asyncio.TimeoutError:
        raise EndpointFailed(host, f"no answer from {url} within {timeout_s:g}s") from None


async def _follow(
    pool: HostPool, host: str, address: str, port: int, path: str, max_bytes: int
) -> bytes:
    """GET `path`, following redirects to paths on the same server."""
    url = f"http://{_authority(address, port)}{path}"
    for _ in range(MAX_REDIRECTS + 1):
        status, reason, headers, body = await _get_once(
            pool, host, address, port, path, max_bytes, url
        )
        location = headers.get("location")
        if status in (301, 302, 303, 307, 308) and location:
            target = urlsplit(urljoin(url, location))
            same = target.hostname == address.lower() and (target.port or 80) == port
            if not same or not target.path:
                raise EndpointFailed(
                    host, f"{url} redirects to {location}, another server: name that one"
                )
            path = target.path + (f"?{target.query}" if target.query else "")
            url = f"http://{_authority(address, port)}{path}"
            continue
        if status != 200:
            raise EndpointFailed(host, f"{url} answered HTTP {status} {reason}".rstrip())
        return body
    raise EndpointFailed(host, f"{url}: more than {MAX_REDIRECTS} redirects")


async def _get_once(
    pool: HostPool, host: str, address: str, port: int, path: str, max_bytes: int, url: str
) -> tuple[int, str, dict[str, str], bytes]:
    request = (
        f"GET {path} HTTP/1.0\r\n"
        f"Host: {_authority(address, port)}\r\n"
        "User-Agent: dflash-tui\r\n"
        "Accept: text/plain\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    chunks: list[bytes] = []
    size = 0
    async with pool.tcp(host, address, port) as (reader, writer):
        try:
            writer.write(request)
            while chunk := await reader.read(65536):
                size += len(chunk)
                if size > max_bytes + _HEADER_LIMIT:
                    raise EndpointFailed(
                        host, f"{url}: the answer is larger than {units.size(max_bytes)}; refused"
                    )
                chunks.append(chunk)
        except RemoteError:
            raise
        except TRANSPORT_ERRORS as exc:
            raise EndpointFailed(host, f"{url}: connection lost while reading ({exc})") from None
    return _parse(host, url, b"".join(chunks), max_bytes)


def _parse(
    host: str, url: str, data: bytes, max_bytes: int
) -> tuple[int, str, dict[str, str], bytes]:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = data.partition(b"\n\n")
    lines = head.decode("latin-1").splitlines()
    status_line = lines[0] if lines else ""
    words = status_line.split(" ", 2)
    if not sep or len(words) < 2 or not words[0].startswith("HTTP/") or not words[1].isdigit():
        shown = status_line[:80] or "nothing"
        raise EndpointFailed(host, f"{url} did not answer in HTTP (got {shown!r})")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _dechunk(host, url, body)
    length = headers.get("content-length", "")
    if length.isdigit() and len(body) < int(length):
        raise EndpointFailed(host, f"{url}: the answer ended after {len(body)} of {length} bytes")
    encoding = headers.get("content-encoding", "").lower()
    if encoding in ("gzip", "deflate"):
        try:
            decompress = zlib.decompressobj(wbits=47)  # gzip or zlib, detected
            body = decompress.decompress(body, max_bytes + 1)
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise EndpointFailed(
                host, f"{url}: cannot decode its {encoding} body ({exc})"
            ) from None
    if len(body) > max_bytes:
        raise EndpointFailed(
            host, f"{url}: the answer is larger than {units.size(max_bytes)}; refused"
        )
    return int(words[1]), words[2] if len(words) > 2 else "", headers, body


def _dechunk(host: str, url: str, body: bytes) -> bytes:
    out = bytearray()
    rest = body
    while True:
        size_line, sep, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip() or b"x", 16)
        except ValueError:
            raise EndpointFailed(host, f"{url}: a malformed chunked body") from None
        if size == 0 or not sep:
            return bytes(out)
        out += rest[:size]
        rest = rest[size + 2 :]
