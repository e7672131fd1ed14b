"""verifylab's blocking calls to a server it started (``server.http``): an answer is (status, body) whatever the
status, a redirect is refused, no answer raises one line."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from verifylab.server import http

from .ports import free_port


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "http://example.invalid/")
            self.end_headers()
            return
        code = 200 if self.path == "/ok" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b'{"path": "%s"}' % self.path.encode())

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.rfile.read(length))

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_answers_redirects_and_silence(server):
    assert http.request(server + "/ok", 5.0) == (200, b'{"path": "/ok"}')
    assert http.request(server + "/missing", 5.0)[0] == 404  # an error status is the server's answer
    assert http.request(server + "/echo", 5.0, {"a": 1}) == (200, b'{"a": 1}')
    with pytest.raises(http.HttpError, match="redirect"):
        http.request(server + "/moved", 5.0)
    closed = free_port()  # nothing listens there, and no other process is handed it meanwhile
    with pytest.raises(http.HttpError, match=f"127.0.0.1:{closed}"):
        http.request(f"http://127.0.0.1:{closed}/x", 2.0)
