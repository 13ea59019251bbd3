"""asyncssh's liboqs search is skipped only where the loader cannot have liboqs."""

from __future__ import annotations

import ctypes.util

from dflash_tui.remote import library_search


def test_liboqs_search_is_skipped_only_when_the_loader_has_none(tmp_path, monkeypatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: asked.append(name) or "x.so")
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    monkeypatch.delenv("LIBRARY_PATH", raising=False)
    cache = tmp_path / "ld.so.cache"
    monkeypatch.setattr(library_search, "LOADER_CACHE", str(cache))

    cache.write_bytes(b"glibc-ld.so.cache1.1 libc.so.6 libssl.so.3")
    with library_search.without_absent_liboqs_search():
        assert ctypes.util.find_library("oqs") is None
        assert ctypes.util.find_library("ssl") == "x.so"  # other names: searched as usual
    assert asked == ["ssl"] and ctypes.util.find_library("oqs") == "x.so"  # restored

    cache.write_bytes(b"glibc-ld.so.cache1.1 liboqs.so.5 libc.so.6")
    with library_search.without_absent_liboqs_search():
        assert ctypes.util.find_library("oqs") == "x.so"
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/oqs/lib")
    cache.write_bytes(b"libc.so.6")
    with library_search.without_absent_liboqs_search():
        assert ctypes.util.find_library("liboqs") == "x.so"
