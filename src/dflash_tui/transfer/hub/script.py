"""The program `fetch` runs on the destination host: a Hub download with huggingface_hub.

It is sent as constant text (`python -c SCRIPT REPO REVISION DEST ENDPOINT
FORCE`) and run by the host's own python. The token is the first line of
stdin (empty: none), never an argument or an environment variable, so no
`ps`, /proc/*/cmdline or environment listing on the host shows it.

What it does: resolves the revision to a commit (repo info), lists the
repo's files at that commit with their sizes, LFS sha256 and git blob ids,
downloads them with `snapshot_download` into `DEST.part/`, checks every
file (size, then the LFS sha256 or the git blob sha1), drops
huggingface_hub's own bookkeeping folder and renames `DEST.part` to `DEST`.
A rerun continues an interrupted `.part` (huggingface_hub resumes files).
While downloading it prints `{"progress": BYTES, "total": BYTES}` lines (once a
second); the last line of stdout is one JSON object: `{"ok": true, ...}` or
`{"ok": false, "error": KIND, "status": HTTP, "message": ...}`.
"""

from __future__ import annotations

SCRIPT = r"""# dflash-tui-fetch
import hashlib, json, os, shutil, sys

def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()
    sys.exit(0 if fields.get("ok") else 1)

repo, revision, dest, endpoint, force = sys.argv[1:6]
token = sys.stdin.readline().strip() or None
revision = revision or "main"
endpoint = endpoint or None
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
try:
    import huggingface_hub
    from huggingface_hub import HfApi, snapshot_download
except ImportError as exc:
    say(ok=False, error="no_hf", status=0, message="huggingface_hub is not installed for " + sys.executable + " (" + str(exc) + ")")

def classify(exc):
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", 0) or 0
    name = type(exc).__name__
    code = ""
    if response is not None:
        code = response.headers.get("X-Error-Code", "") or ""
    if name == "GatedRepoError" or code == "GatedRepo":
        return "gated", status or 403
    if name == "RevisionNotFoundError" or code == "RevisionNotFound":
        return "revision", status or 404
    if status == 401:
        return "unauthorized", 401
    if status == 403:
        return "forbidden", 403
    if name in ("RepositoryNotFoundError",) or status == 404:
        return "missing", status or 404
    if status >= 500 or status == 429:
        return "unavailable", status
    if name in ("ConnectError", "ConnectTimeout", "ReadTimeout", "TimeoutException", "LocalEntryNotFoundError", "OfflineModeIsEnabled", "ConnectionError"):
        return "unreachable", 0
    return "failed", status

def fail(exc):
    kind, status = classify(exc)
    if kind in ("gated", "unauthorized", "forbidden", "missing", "revision"):
        shutil.rmtree(dest + ".part", ignore_errors=True)  # refused: nothing there to resume
    say(ok=False, error=kind, status=status, message=(type(exc).__name__ + ": " + str(exc).strip().splitlines()[0])[:400] if str(exc).strip() else type(exc).__name__)

if os.path.lexists(dest) and force != "1":
    say(ok=False, error="exists", status=0, message=dest + " exists; use --force to replace it")
part = dest + ".part"
api = HfApi(endpoint=endpoint, token=token)
try:
    info = api.repo_info(repo, revision=revision, token=token)
    commit = info.sha
    files = [f for f in api.list_repo_tree(repo, recursive=True, revision=commit, token=token) if hasattr(f, "blob_id")]
except Exception as exc:
    fail(exc)
need = sum(f.size for f in files)
try:
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(dest))).free
except OSError as exc:
    say(ok=False, error="missing", status=0, message="parent of " + dest + ": " + str(exc))
if free < need:
    say(ok=False, error="disk_full", status=0, message="%s: %d bytes to write, %d free" % (dest, need, free))
import threading

def progress(stop):
    while not stop.wait(1.0):
        done = 0
        for root, _dirs, names in os.walk(part):
            for name in names:
                try:
                    done += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
        sys.stdout.write(json.dumps({"progress": done, "total": need}) + "\n")
        sys.stdout.flush()

stop = threading.Event()
threading.Thread(target=progress, args=(stop,), daemon=True).start()
try:
    snapshot_download(repo, revision=commit, local_dir=part, token=token, endpoint=endpoint)
except Exception as exc:
    stop.set()
    fail(exc)
stop.set()

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

def git_blob(path, size):
    h = hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

done = []
for f in files:
    path = os.path.join(part, f.path)
    size = f.lfs.size if f.lfs is not None else f.size
    if not os.path.isfile(path) or os.path.getsize(path) != size:
        say(ok=False, error="corrupt", status=0, message=f.path + ": missing or wrong size after the download")
    digest = sha256(path)
    if f.lfs is not None:
        if digest != f.lfs.sha256:
            say(ok=False, error="corrupt", status=0, message="%s: sha256 %s, the Hub says %s" % (f.path, digest, f.lfs.sha256))
    elif git_blob(path, size) != f.blob_id:
        say(ok=False, error="corrupt", status=0, message="%s: git blob id differs from the Hub's %s" % (f.path, f.blob_id))
    done.append({"path": f.path, "size": size, "sha256": digest, "lfs": f.lfs is not None})
shutil.rmtree(os.path.join(part, ".cache", "huggingface"), ignore_errors=True)
try:
    os.rmdir(os.path.join(part, ".cache"))
except OSError:
    pass
if os.path.lexists(dest):
    if force != "1":
        say(ok=False, error="exists", status=0, message=dest + " appeared during the download; use --force")
    shutil.rmtree(dest) if os.path.isdir(dest) and not os.path.islink(dest) else os.unlink(dest)
os.rename(part, dest)
say(ok=True, commit=commit, dest=dest, files=done, bytes=need, hf=huggingface_hub.__version__)
"""
