"""`STORE:path` words: a place in a `[stores.NAME]` store, beside `host:path`.

The name before the ':' must be a store from hosts.toml (config validation
keeps store and host names apart). The path is relative to the store's
`s3://bucket/prefix`; a trailing '/' means "into this folder", as with a
directory on a host.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class StoreEndpoint:
    """One side of a transfer that is an object store: `store` and a path under its prefix."""

    store: str
    path: str

    @property
    def is_local(self) -> bool:
        return False

    @property
    def host(self) -> None:
        return None

    def __str__(self) -> str:
        return f"{self.store}:{self.path}"

    def join(self, relative: str) -> StoreEndpoint:
        if not relative:
            return self
        return StoreEndpoint(
            self.store, posixpath.join(self.path, relative) if self.path else relative
        )

    @property
    def name(self) -> str:
        """The last path component (what a copy into a folder is called)."""
        return posixpath.basename(self.path.rstrip("/"))


def store_name(word: str) -> str | None:
    """The NAME of a `NAME:path` word (None for a local path or a bare word)."""
    colon = word.find(":")
    slash = word.find("/")
    if colon > 0 and (slash == -1 or colon < slash):
        return word[:colon]
    return None


def names_store(word: object, stores: Collection[str]) -> bool:
    """Whether `word` (a string or an endpoint) is a place in one of `stores`."""
    if isinstance(word, StoreEndpoint):
        return True
    return isinstance(word, str) and store_name(word) in stores


def parse_store_endpoint(word: str) -> StoreEndpoint:
    """`NAME:path` -> StoreEndpoint (the caller checked NAME is a store)."""
    name = store_name(word)
    assert name is not None
    path = word[len(name) + 1 :]
    return StoreEndpoint(name, path.lstrip("/") if path not in ("/",) else "")
