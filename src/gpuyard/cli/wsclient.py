"""A WebSocket client of the API's session sockets (exec, port-forward), light enough for
the fast path: the standard library's `socket` and `ssl`, and `wsproto` (pure Python, on h11;
with h11 most of the CLI's start-up: bench/exec_latency.py) for the protocol. No asyncio, no
threads: the caller `select`s on `fileno()` and reads what arrived with `receive`.

A session's messages are binary frames whose first byte is the channel (0 input, 1 stdout,
2 stderr, 3 the end as JSON, 4 a terminal's size, 5 the session opened, 6 what an attached
session waits for): docs/exec.md.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
from urllib.parse import urlsplit

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from gpuyard.cli.basics import ApiError, ConnectionLost, ServerUnreachable, api_error

CONNECT_TIMEOUT = 5.0
CHUNK = 64 << 10
END = 3

Frame = tuple[int, bytes]


class WsSession:
    """One WebSocket to `path` of the server at `url`, with the caller's token."""

    def __init__(self, url: str, token: str | None, path: str) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ServerUnreachable(self.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            sock = socket.create_connection((parts.hostname, port), CONNECT_TIMEOUT)
        except OSError as exc:
            raise ServerUnreachable(self.url) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if parts.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
        self.sock = sock
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._parts: list[bytes] = []
        self.pending: list[Frame] = []  # received, not yet handed out (see `receive`)
        self.closed = False
        headers = [(b"user-agent", b"gpuyard-cli")]
        if token:
            headers.append((b"authorization", f"Bearer {token}".encode()))
        host = parts.netloc.rpartition("@")[2]
        self._send(Request(host=host, target=parts.path + path, extra_headers=headers))
        self._handshake()

    def fileno(self) -> int:
        return self.sock.fileno()

    def _send(self, event: object) -> None:
        try:
            self.sock.sendall(self._ws.send(event))  # type: ignore[arg-type]
        except OSError as exc:
            raise ConnectionLost(self.url, str(exc)) from exc

    def _handshake(self) -> None:
        body = b""
        while True:
            for event in self._read_events():
                if isinstance(event, AcceptConnection):
                    self.sock.settimeout(None)
                    return
                if isinstance(event, RejectConnection):
                    status = event.status_code
                    if not event.has_body:
                        raise api_error(status, "", b"")
                elif isinstance(event, RejectData):
                    body += event.data
                    if event.body_finished:
                        raise api_error(status, "", body)

    def _read_events(self) -> list[object]:
        try:
            data = self.sock.recv(CHUNK)
        except OSError as exc:
            raise ConnectionLost(self.url, str(exc)) from exc
        self._ws.receive_data(data or None)
        return list(self._ws.events())

    def send_json(self, value: object) -> None:
        """A text message: the session's request."""
        self._send(TextMessage(data=json.dumps(value)))

    def send(self, channel: int, data: bytes = b"") -> None:
        self._send(BytesMessage(data=bytes([channel]) + data))

    def receive(self) -> list[Frame]:
        """The frames that arrived (call when `fileno()` is readable, or `pending` is not
        empty); channel 3 at the end, also when the server closed without saying why."""
        if self.pending:
            frames, self.pending = self.pending, []
            return frames
        frames = []
        for event in self._read_events():
            if isinstance(event, Message):
                self._parts.append(event.data if isinstance(event.data, bytes) else b"")
                if event.message_finished:
                    data = b"".join(self._parts)
                    self._parts = []
                    if data:
                        frames.append((data[0], data[1:]))
            elif isinstance(event, Ping):
                self._send(event.response())
            elif isinstance(event, CloseConnection):
                if not self.closed:
                    self.closed = True
                    self._send(event.response())
                if not any(ch == END for ch, _ in frames):
                    frames.append((END, b'{"error": "the server closed the session"}'))
        if self._ws.state.name == "CLOSED" and not frames and not self.closed:
            self.closed = True
            frames.append((END, b'{"error": "the connection to the server was lost"}'))
        return frames

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(ConnectionLost, ValueError):
                self._send(CloseConnection(code=1000))
        self.sock.close()


def ended(payload: bytes) -> dict[str, object]:
    """A channel-3 frame's JSON (an `error` when it cannot be read)."""
    try:
        value = json.loads(payload)
    except ValueError:
        return {"error": "the server's last frame is not JSON"}
    return value if isinstance(value, dict) else {"error": "the server's last frame is odd"}


def refusal(end: dict[str, object]) -> ApiError:
    """A session the server refused (its channel-3 `error` and `status`), as an ApiError."""
    status = end.get("status")
    body = json.dumps({"detail": end.get("error"), "errors": end.get("errors") or []})
    return api_error(status if isinstance(status, int) else 500, "", body.encode())


__all__ = ["ApiError", "ConnectionLost", "WsSession", "ended", "refusal"]
