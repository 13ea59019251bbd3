"""A local HTTP server answering the Hugging Face Hub's endpoints that snapshot_download uses.

Read from huggingface_hub (2.x): `repo_info` is GET /api/models/{repo}/revision/{rev}
(JSON with `sha`), `list_repo_tree` is GET /api/models/{repo}/tree/{commit}
(JSON list, `oid` = git blob id, `lfs` = {oid: sha256, size, pointerSize}),
and each file is HEAD then GET /{repo}/resolve/{commit}/{path} with
X-Repo-Commit, ETag (git blob id) or X-Linked-Etag/X-Linked-Size (LFS sha256
and size). Refusals carry X-Error-Code as the Hub sends it: GatedRepo (403),
RepoNotFound (401 without access, 404), RevisionNotFound.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Repo:
    files: dict[str, bytes] = field(default_factory=dict)
    lfs: set[str] = field(default_factory=set)
    refusal: tuple[int, str] | None = None  # on every request: (status, X-Error-Code)
    gated: bool = False  # metadata answers, file downloads are refused with 403 GatedRepo


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.authorizations: list[str] = []
        self.delay_s = 0.0
        self.requests: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_HEAD(self) -> None:
                hub.answer(self, head=True)

            def do_GET(self) -> None:
                hub.answer(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ answering

    def answer(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        path = unquote(urlparse(h.path).path)
        self.requests.append(f"{h.command} {path}")
        self.authorizations.append(h.headers.get("Authorization", ""))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6:
            repo_id, what, rev = "/".join(parts[2:4]), parts[4], parts[5]
            repo = self.repos.get(repo_id)
            if self.refuse(h, repo, head):
                return
            assert repo is not None
            if rev not in ("main", COMMIT):
                return self.error(h, 404, "RevisionNotFound", "Invalid rev id", head)
            if what == "revision":
                body = {
                    "id": repo_id,
                    "modelId": repo_id,
                    "sha": COMMIT,
                    "private": False,
                    "gated": "manual" if repo.gated else False,
                    "siblings": [{"rfilename": name} for name in repo.files],
                }
            else:
                body = [self.tree_entry(repo, name) for name in repo.files]
            return self.send(
                h, 200, json.dumps(body).encode(), {"Content-Type": "application/json"}, head
            )
        if len(parts) >= 5 and parts[2] == "resolve":
            repo_id, name = "/".join(parts[:2]), "/".join(parts[4:])
            repo = self.repos.get(repo_id)
            if self.refuse(h, repo, head):
                return
            assert repo is not None
            if repo.gated:
                return self.error(
                    h, 403, "GatedRepo", f"Access to model {repo_id} is restricted.", head
                )
            if name not in repo.files:
                return self.error(h, 404, "EntryNotFound", "Entry not found", head)
            data = repo.files[name]
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{git_blob(data)}"'}
            if name in repo.lfs:
                headers["X-Linked-Etag"] = f'"{hashlib.sha256(data).hexdigest()}"'
                headers["X-Linked-Size"] = str(len(data))
            start = 0
            ranged = h.headers.get("Range", "")
            if ranged.startswith("bytes=") and not head:
                start = int(ranged[6:].split("-")[0] or 0)
            if not head and self.delay_s:
                time.sleep(self.delay_s)
            if start:
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
                return self.send(h, 206, data[start:], headers, head)
            return self.send(h, 200, data, headers, head)
        self.error(h, 404, "", "not found", head)

    def tree_entry(self, repo: Repo, name: str) -> dict[str, object]:
        data = repo.files[name]
        entry: dict[str, object] = {
            "type": "file",
            "path": name,
            "size": len(data),
            "oid": git_blob(data),
        }
        if name in repo.lfs:
            entry["lfs"] = {
                "oid": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "pointerSize": 134,
            }
        return entry

    def refuse(self, h: BaseHTTPRequestHandler, repo: Repo | None, head: bool) -> bool:
        if repo is None:
            self.error(h, 401, "RepoNotFound", "Invalid username or password.", head)
            return True
        if repo.refusal is not None:
            status, code = repo.refusal
            self.error(h, status, code, "Repository not found", head)
            return True
        return False

    def error(
        self, h: BaseHTTPRequestHandler, status: int, code: str, message: str, head: bool
    ) -> None:
        headers = {"X-Error-Message": message, "Content-Type": "application/json"}
        if code:
            headers["X-Error-Code"] = code
        self.send(h, status, json.dumps({"error": message}).encode(), headers, head)

    def send(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        headers: dict[str, str],
        head: bool,
    ) -> None:
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)
