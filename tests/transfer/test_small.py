"""Small relays start no interpreter on either host (sh and coreutils only).

The hosts here have a `python3` first on their PATH that records every call
and fails, so any use of it shows (a relay that needed it would fail too).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_tui.transfer import RelayOptions, TransferError, relay
from dflash_tui.transfer.hosts import small as small_path
from dflash_tui.transfer.plan import inspect_paths
from dflash_tui.transfer.sides import RemoteSide
from tests.transfer.files import part_files, random_file, relay_env, tree_digest

MIB = 1 << 20
SSHD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _trap_python(root: Path) -> tuple[dict[str, str], Path]:
    """A session PATH whose python3 notes each call in the returned file and fails."""
    bin_dir = root / "trap-bin"
    bin_dir.mkdir(parents=True)
    calls = root / "python3-calls"
    trap = bin_dir / "python3"
    trap.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 1\n')
    trap.chmod(0o755)
    return {"PATH": f"{bin_dir}:{SSHD_PATH}"}, calls


@pytest.fixture
def trapped_hosts(sshd_factory, write_config, tmp_path: Path):  # type: ignore[no-untyped-def]
    env, calls = _trap_python(tmp_path)
    a, b = sshd_factory("a", env=env), sshd_factory("b", env=env)
    return a, b, write_config({"a": a, "b": b}), calls


async def test_one_small_file_moves_with_no_interpreter_on_either_host(trapped_hosts) -> None:
    a, b, config, calls = trapped_hosts
    sha = random_file(a.home / "w.bin", MIB + 3)
    (a.home / "w.bin").chmod(0o640)
    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, f"a:{a.home}/w.bin", f"b:{b.home}/w.bin")
        again = await relay(pool, conn, f"a:{a.home}/w.bin", f"b:{b.home}/w.bin")
    assert result.files[0].sha256_src == result.files[0].sha256_dst == sha
    assert hashlib.sha256((b.home / "w.bin").read_bytes()).hexdigest() == sha
    assert (b.home / "w.bin").stat().st_mode & 0o777 == 0o640
    assert result.bytes_sent == MIB + 3 and not part_files(b.home)
    assert again.bytes_sent == 0 and again.files[0].skipped
    assert not calls.exists(), calls.read_text()


async def test_a_few_files_with_hostile_names_and_an_empty_one(trapped_hosts) -> None:
    a, b, config, calls = trapped_hosts
    src = a.home / "run $(x)"
    names = ["new\nline", "back\\slash", "-leading-dash", "x.part", "a b;c", "sub/ünï ✓"]
    for i, name in enumerate(names):
        random_file(src / name, 1000 * i + 1, seed=i)
    (src / "empty").write_bytes(b"")
    assert len(names) + 1 <= small_path.MAX_FILES
    async with relay_env(config) as (pool, conn):
        result = await relay(pool, conn, f"a:{src}", f"b:{b.home}/")
    assert tree_digest(b.home / src.name) == tree_digest(src)
    assert all(f.sha256_src == f.sha256_dst for f in result.files) and len(result.files) == 7
    assert part_files(b.home) == [b.home / src.name / "x.part"]  # the source's own file
    assert not calls.exists()


async def test_a_file_in_the_way_at_the_final_name_is_never_replaced(trapped_hosts) -> None:
    """Without --force an existing different file stops the relay before anything moves;
    with it, the file is replaced (the small path's `mv -f`)."""
    a, b, config, calls = trapped_hosts
    sha = random_file(a.home / "w.bin", 4000)
    (b.home / "w.bin").write_bytes(b"something else")
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError) as caught:
            await relay(pool, conn, f"a:{a.home}/w.bin", f"b:{b.home}/w.bin")
        assert caught.value.kind == "collision"
        assert (b.home / "w.bin").read_bytes() == b"something else"
        await relay(
            pool, conn, f"a:{a.home}/w.bin", f"b:{b.home}/w.bin", options=RelayOptions(force=True)
        )
    assert hashlib.sha256((b.home / "w.bin").read_bytes()).hexdigest() == sha
    assert not part_files(b.home) and not calls.exists()


async def test_a_missing_source_file_says_so(trapped_hosts) -> None:
    a, b, config, _calls = trapped_hosts
    async with relay_env(config) as (pool, conn):
        with pytest.raises(TransferError) as caught:
            await relay(pool, conn, f"a:{a.home}/nothing.bin", f"b:{b.home}/x.bin")
    assert caught.value.kind == "missing"
    assert not part_files(b.home)


async def test_the_destination_probe_answers_many_paths_without_python(trapped_hosts) -> None:
    """More than 16 paths used to start python3; now one stat answers for all of them."""
    a, _b, config, calls = trapped_hosts
    root = a.home / "probe"
    (root / "dir").mkdir(parents=True)
    (root / "file").write_bytes(b"12345")
    (root / "link").symlink_to(root / "nowhere")
    paths = [str(root / "file"), str(root / "dir"), str(root / "link"), str(root / "absent")]
    paths += [str(root / f"absent-{i}") for i in range(20)] + [str(root / "file")]
    async with relay_env(config) as (pool, _conn):
        states = await inspect_paths(RemoteSide(pool, "a"), paths)
    kinds = [(s.kind, s.size) for s in states]
    assert kinds[:4] == [("f", 5), ("d", 0), ("o", 0), ("n", 0)]
    assert kinds[4:-1] == [("n", 0)] * 20 and kinds[-1] == ("f", 5)
    assert not calls.exists()


def test_the_relay_command_parses_without_the_engine_asyncssh_or_textual() -> None:
    """`dflash-tui relay` loads the engine and asyncssh only once it runs one."""
    code = (
        "import sys\n"
        "from dflash_tui import cli\n"
        "cli.build_parser('relay').parse_args(['relay', 'a:/x', 'b:/y'])\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    heavy_modules = ("asyncssh", "asyncio", "textual", "torch", "cryptography")
    for heavy in (*heavy_modules, "dflash_tui.transfer.hosts.relay"):
        assert heavy not in loaded, heavy
