"""``Server.healthy`` while SGLang starts: only an HTTP 200 on /health counts (no SGLang)."""

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ppsched.sglang_patch.cpu_server import Server


class Health(BaseHTTPRequestHandler):
    status = 200

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def serve_health(status: int) -> ThreadingHTTPServer:
    handler = type("H", (Health,), {"status": status})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def test_healthy_only_on_http_200(tmp_path):
    for status, want in ((200, True), (503, False)):
        httpd = serve_health(status)
        try:
            assert Server(None, httpd.server_address[1], tmp_path / "log").healthy() is want
        finally:
            httpd.shutdown()
            httpd.server_close()


def test_an_answer_that_is_not_http_is_not_yet_healthy(tmp_path):
    """What a TCP self-connect reads: its own request back as the status line."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def echo():
            conn, _ = listener.accept()
            with conn:
                conn.sendall(conn.recv(4096))

        t = threading.Thread(target=echo, daemon=True)
        t.start()
        assert Server(None, listener.getsockname()[1], tmp_path / "log").healthy() is False
        t.join(5)


def test_nothing_listening_is_not_yet_healthy(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: the connection is refused
        assert Server(None, port, tmp_path / "log").healthy() is False
