"""Installing the eval harness (or the cache builder) on a host, once per version, verified there.

What is uploaded is a bundle: the program's folder with what the shipped programs
share (`shipped/common/`) and one bootstrap (`shipped/bundle_main.py`, the bundle's
`__main__.py`). The harness version is the sha256 of a manifest in `sha256sum`
format (`<sha256>  <file>` per `*.py` file of the bundle, sorted by name), so the host can check
both the files (`sha256sum -c MANIFEST`) and the version itself (the
manifest's own hash names the directory). Only `*.py` files count: a
`__pycache__` appears next to them after the first run. The harness lands in
`$HOME/.cache/dflash-tui/harness/<sha256>/` by an atomic rename, so a
half-unpacked copy is never used, and two consoles installing at once is
harmless. The cache builder (`shipped/cachebuild/`, docs/evals.md "Building a cache") travels the
same way to `$HOME/.cache/dflash-tui/cachebuild/<sha256>/` (`folder="cachebuild"`).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from functools import lru_cache
from pathlib import Path

from dflash_tui.remote.command import shell_script
from dflash_tui.remote.errors import CommandFailed
from dflash_tui.remote.pool import HostPool

MANIFEST = "MANIFEST"


def shipped_dir() -> Path:
    """The folder of the programs shipped to hosts in this installation (`shipped/`)."""
    import dflash_tui.shipped as shipped

    return Path(shipped.__file__).resolve().parent


def harness_dir() -> Path:
    """The harness package directory in this installation (its `__init__` imports nothing)."""
    return shipped_dir() / "harness"


def cachebuild_dir() -> Path:
    """The cache builder's package directory (its `__init__` imports nothing either)."""
    return shipped_dir() / "cachebuild"


def servedbench_dir() -> Path:
    """The served bench's package directory (stdlib only; its `__init__` imports nothing)."""
    return shipped_dir() / "servedbench"


def _python_files(root: Path, prefix: str) -> list[tuple[str, bytes]]:
    return [
        (f"{prefix}{p.relative_to(root).as_posix()}", p.read_bytes())
        for p in root.rglob("*.py")
        if "__pycache__" not in p.parts
    ]


@lru_cache(maxsize=4)
def _bundle(root: Path) -> tuple[str, bytes]:
    """The upload of the program in `root` (a folder of `shipped/`): that folder, the
    shared `common/`, and `shipped/`'s `__init__.py` with `bundle_main.py` as the
    bundle's `__main__.py`, so `python BUNDLE_DIR ...` runs it (shipped/bundle_main.py)."""
    shipped = root.parent
    files = sorted(
        [
            *_python_files(root, f"{root.name}/"),
            *_python_files(shipped / "common", "common/"),
            ("__init__.py", (shipped / "__init__.py").read_bytes()),
            ("__main__.py", (shipped / "bundle_main.py").read_bytes()),
        ]
    )
    manifest = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in files)
    sha = hashlib.sha256(manifest.encode()).hexdigest()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in [*files, (MANIFEST, manifest.encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return sha, buf.getvalue()


def harness_sha256(root: Path | None = None) -> str:
    """The harness version: sha256 of its manifest (see the module docstring)."""
    return _bundle(root or harness_dir())[0]


def harness_tar(root: Path | None = None) -> bytes:
    """The harness bundle (see `_bundle`) plus MANIFEST as an uncompressed tar archive."""
    return _bundle(root or harness_dir())[1]


CHECK_SCRIPT = r"""h="$HOME/.cache/dflash-tui/${2:-harness}/$1"
if [ -f "$h/MANIFEST" ]; then echo present; else echo absent; fi
"""

INSTALL_SCRIPT = r"""# $1 sha256 of MANIFEST, $2 folder (harness); stdin: tar of the files and MANIFEST
sha=$1
base="$HOME/.cache/dflash-tui/${2:-harness}"
h="$base/$sha"
if [ -f "$h/MANIFEST" ]; then cat >/dev/null; echo present; exit 0; fi
mkdir -p "$base" || exit 3
t=$(mktemp -d "$base/.$sha.XXXXXX") || exit 3
if ! tar -x -f - -C "$t"; then rm -rf "$t"; echo "E cannot unpack the ${2:-harness} files into $base" >&2; exit 4; fi
got=$(sha256sum < "$t/MANIFEST" | cut -d' ' -f1)
if [ "$got" != "$sha" ] || ! (cd "$t" && sha256sum -c --quiet MANIFEST >/dev/null); then
    rm -rf "$t"; echo "E the ${2:-harness} files arrived damaged (sha256 mismatch)" >&2; exit 4
fi
chmod 755 "$t"
if mv -T "$t" "$h" 2>/dev/null; then echo installed; exit 0; fi
rm -rf "$t"
[ -f "$h/MANIFEST" ] && { echo present; exit 0; }
echo "E cannot install the ${2:-harness} files into $h" >&2; exit 4
"""


class HarnessUploader:
    """Makes sure a host has this harness version; remembers hosts already checked.

    `folder` names the install folder under `~/.cache/dflash-tui/` ("harness", or
    "cachebuild" with `root=cachebuild_dir()`)."""

    def __init__(self, pool: HostPool, root: Path | None = None, folder: str = "harness") -> None:
        self.pool = pool
        self.root = root or harness_dir()
        self.folder = folder
        self._known: set[str] = set()

    @property
    def sha256(self) -> str:
        return harness_sha256(self.root)

    def forget(self, host: str) -> None:
        """Check `host` again next time (its copy was found missing)."""
        self._known.discard(host)

    async def present(self, host: str) -> bool:
        """True if `host` has this version installed (one small command)."""
        if host in self._known:
            return True
        result = await self.pool.run(
            host, shell_script(CHECK_SCRIPT, self.sha256, self.folder), timeout=30
        )
        if result.stdout.strip() == "present":
            self._known.add(host)
            return True
        return False

    async def install(self, host: str) -> str:
        """Upload and verify the harness on `host`; returns "installed" or "present".

        Raises the pool's RemoteError subclasses; CommandFailed names the check that failed.
        """
        sha = self.sha256
        result = await self.pool.run(
            host,
            shell_script(INSTALL_SCRIPT, sha, self.folder),
            input=harness_tar(self.root),
            encoding=None,
            timeout=120,
            check=False,
        )
        out = result.stdout.decode("utf-8", "replace").strip()
        if result.exit_status != 0 or out not in ("installed", "present"):
            err = result.stderr.decode("utf-8", "replace")
            what = "the eval harness" if self.folder == "harness" else f"the {self.folder} program"
            raise CommandFailed(host, f"install {what}", result.exit_status, err or out)
        self._known.add(host)
        return out

    async def ensure(self, host: str) -> bool:
        """Install if needed; True if an upload happened."""
        if await self.present(host):
            return False
        return await self.install(host) == "installed"
