"""`host:path` or a local path, parsed the way scp does it.

A word is remote when it has a ':' before any '/', and the part before the
':' must then name a host from hosts.toml (a typo is an error, not a local
file called `ct12:...`). A local path that contains ':' is written with a
slash first, as with scp: `./a:b`. Remote paths are never expanded locally:
a relative path (or `~/x`) is relative to the remote login directory.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Collection
from dataclasses import dataclass


class EndpointError(ValueError):
    """A SRC or DST word that cannot be used (bad usage: exit 2)."""


@dataclass(frozen=True)
class Endpoint:
    """One side of a transfer: `host` is None for a path on this (the jump) machine."""

    host: str | None
    path: str

    @property
    def is_local(self) -> bool:
        return self.host is None

    def __str__(self) -> str:
        return self.path if self.host is None else f"{self.host}:{self.path}"

    def join(self, relative: str) -> Endpoint:
        """This endpoint with `relative` (a '/'-separated path) appended."""
        if not relative:
            return self
        if self.path in (".", "./"):
            return Endpoint(self.host, _no_option(relative))
        return Endpoint(self.host, posixpath.join(self.path, relative))

    @property
    def name(self) -> str:
        """The last path component (what a copy into a directory is called)."""
        return posixpath.basename(self.path.rstrip("/")) or self.path


def parse_endpoint(text: str, hosts: Collection[str]) -> Endpoint:
    """Parse `host:path` or a local path; raises EndpointError naming the problem."""
    if not text:
        raise EndpointError("empty path")
    colon = text.find(":")
    slash = text.find("/")
    if colon > 0 and (slash == -1 or colon < slash):
        host, path = text[:colon], text[colon + 1 :]
        if host not in hosts:
            known = ", ".join(sorted(hosts)) or "none"
            raise EndpointError(
                f"{text!r}: no host {host!r} in the config (hosts: {known}); "
                f"for a local path containing ':' write ./{text}"
            )
        return Endpoint(host, remote_path(path))
    if colon == 0:
        raise EndpointError(f"{text!r}: missing host name before ':'")
    return Endpoint(None, local_path(text))


def remote_path(path: str) -> str:
    """A remote path as the remote tools should see it (never expanded here).

    `~` and `~/x` mean the login directory, which is the working directory of
    every remote command, so they become `.` and `x`. A path starting with
    '-' gets './' so no tool mistakes it for an option.
    """
    if path in ("", "~", "~/"):
        return "."
    if path.startswith("~/"):
        path = path[2:] or "."
    return _no_option(path)


def local_path(path: str) -> str:
    """A local path with `~` expanded (it is ours to expand) and no leading '-'."""
    return _no_option(os.path.expanduser(path))


def _no_option(path: str) -> str:
    return "./" + path if path.startswith("-") else path
