"""Port streams to servers on this machine's loopback, for the API's tests of web services
and port-forward: the node's real `NodeStreams` (its frames, ends and errors), but a task's
port is a port of 127.0.0.1 given in `ports` (no container, no network namespace).

`EchoServer` answers every request with what it received, as JSON, so that a test sees what
a task is told."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from gpuyard.runtime.streams import NodeStreams, _PortStream
from gpuyard.runtime.taskexec import ExecError


class LoopbackStreams(NodeStreams):
    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp)
        self.ports: dict[int, int] = {}  # a task's port → a port of 127.0.0.1
        self.opened: list[tuple[str, int]] = []

    def open_port(self, key: str, port: int) -> str:
        self._room()
        self.opened.append((key, port))
        if port not in self.ports:
            raise ExecError(f"cannot connect to port {port} in the task: nothing listens there")
        sock = socket.create_connection(("127.0.0.1", self.ports[port]), timeout=5)
        sock.settimeout(None)
        return self._add(_PortStream(sock))


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if self.headers.get("transfer-encoding") == "chunked":
            body = self._chunked()
        else:
            body = self.rfile.read(length) if length else b""
        seen = {
            "method": self.command,
            "path": self.path,
            "headers": [[k.lower(), v] for k, v in self.headers.items()],
            "body": body.decode(errors="replace"),
        }
        out = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("Set-Cookie", "app=1; Path=/")
        self.send_header("Set-Cookie", "gpuyard_session=planted; Path=/")
        self.send_header("Service-Worker-Allowed", "/")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    def _chunked(self) -> bytes:
        body = b""
        while True:
            size = int(self.rfile.readline().strip(), 16)
            if not size:
                self.rfile.readline()
                return body
            body += self.rfile.read(size)
            self.rfile.readline()

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        """Quiet."""


class EchoServer:
    """An HTTP server on 127.0.0.1 in a thread (`with EchoServer() as port:`)."""

    def __enter__(self) -> int:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
