"""`--direct`: the destination pulls from the source with its own ssh, still verified."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from dflash_tui.transfer import RelayOptions, check_direct, relay
from tests.testbed import ClientKey, SshdHost
from tests.transfer.conftest import part_files, random_file, relay_env

MIB = 1 << 20


def _ssh_home(root: Path, key: ClientKey, source: SshdHost) -> Path:
    """A /root for the destination's sessions: a key the source accepts, its host key."""
    ssh = root / ".ssh"
    ssh.mkdir(parents=True)
    shutil.copy(key.private, ssh / "id_ed25519")
    (ssh / "id_ed25519").chmod(0o600)
    (ssh / "known_hosts").write_text(source.known_hosts_line())
    root.chmod(0o700)
    return root


async def test_direct_pull_when_the_destination_reaches_the_source(
    sshd_factory, home_sshd, write_config, client_key: ClientKey, tmp_path: Path
) -> None:
    a = sshd_factory("a")
    b = home_sshd("b", _ssh_home(tmp_path / "b-root", client_key, a))
    config = write_config({"a": a, "b": b})
    size = 5 * MIB + 1
    sha = random_file(a.home / "model.safetensors", size)
    async with relay_env(config) as (pool, conn):
        check = await check_direct(pool, "a", "b")
        assert check.ok, check.reason
        result = await relay(
            pool, conn, f"a:{a.home}/model.safetensors", f"b:{b.home}/model.safetensors",
            options=RelayOptions(direct=True, range_bytes=2 * MIB),
        )  # fmt: skip
    assert result.mode == "direct" and result.bytes_sent == size
    assert result.files[0].sha256_src == result.files[0].sha256_dst == sha
    assert hashlib.sha256((b.home / "model.safetensors").read_bytes()).hexdigest() == sha
    assert not part_files(b.home)
