"""The request handler both stand-in engines build on: the demo's (`demo/served_engine.py`)
and the test bed's (`tests/evals/standin_engine.py`). It logs nothing (an engine's
requests are not the bench's output) and answers with a length, so a client on
keep-alive knows where each reply ends."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


class QuietReplyHandler(BaseHTTPRequestHandler):
    """`reply(status, body, kind)`; the engines add their do_GET and do_POST."""

    def log_message(self, *_: object) -> None:
        pass

    def reply(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
