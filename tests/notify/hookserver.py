"""A webhook receiver on loopback: what apprise's json:// and form:// targets POST.

Real HTTP, a real server thread; tests read `messages` (each the decoded body plus
the request's path and Authorization header) and wait on them with deadlines.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs


@dataclass(frozen=True)
class Received:
    path: str
    authorization: str | None
    body: dict[str, Any]
    at: float = 0.0
    """When it was received (time.time()), for counting alerts per fault window."""

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))

    @property
    def title(self) -> str:
        return str(self.body.get("title", ""))


class HookServer:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.messages: list[Received] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                ctype = self.headers.get("Content-Type", "")
                if "json" in ctype:
                    body = json.loads(raw)
                else:
                    body = {k: v[0] for k, v in parse_qs(raw).items()}
                with server._lock:
                    server.messages.append(
                        Received(self.path, self.headers.get("Authorization"), body, time.time())
                    )
                self.send_response(server.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> HookServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def received(self) -> list[Received]:
        with self._lock:
            return list(self.messages)
