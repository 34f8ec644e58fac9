"""Registries on 127.0.0.1 for the image-pull tests, real HTTP that skopeo talks to.

- `Registry(layout)`: a read-only OCI distribution registry (plain HTTP: the node lists it in
  `GPUYARD_INSECURE_REGISTRIES`) serving the images of an OCI layout, `REPO:TAG` → the layout's
  ref `TAG`; it counts the layer blobs it sent, so a test can tell how many pulls happened.
  `Registry(layout, users={"alice": "pw"})` asks for HTTP basic auth (401 with
  `WWW-Authenticate: Basic`, as a registry behind htpasswd does) and counts what it refused.
- `HungRegistry()`: accepts connections and never answers, a registry that hangs.
- `closed_port()`: a port where nothing listens (connection refused).
- `busybox_layout(base)`: an OCI layout with one busybox-static image, ref `1`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import subprocess
import tarfile
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
REF_ANNOTATION = "org.opencontainers.image.ref.name"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def busybox_layout(base: Path, marker: str = "from-the-registry") -> Path:
    """`base/layout`, an OCI layout with ref `1`: busybox-static, /etc/marker."""
    root = base / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in ("sh", "cat", "echo", "sleep"):
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "marker").write_text(f"{marker}\n")
    tar_path = base / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname=".")
    layout = base / "layout"
    for args in (["init", "--layout", str(layout)], ["new", "--image", f"{layout}:1"],
                 ["raw", "add-layer", "--image", f"{layout}:1", str(tar_path)]):
        subprocess.run(["umoci", *args], check=True, capture_output=True)
    return layout


class Registry:
    """Serves `layout` on 127.0.0.1:`port` (a free one unless given) until `close`."""

    def __init__(self, layout: Path, port: int = 0, users: dict[str, str] | None = None) -> None:
        self.layout = layout
        self.sent: Counter[str] = Counter()  # "manifest" / "blob" / "refused" → how many
        self.users = users  # None: anyone may pull
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.host = f"localhost:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _manifest(self, tag: str) -> tuple[bytes, str] | None:
        index = json.loads((self.layout / "index.json").read_text())
        for desc in index.get("manifests", []):
            if tag in (desc.get("annotations", {}).get(REF_ANNOTATION), desc["digest"]):
                return self._blob(desc["digest"]), desc["mediaType"]
        return None

    def allows(self, header: str | None) -> bool:
        """Whether an `Authorization` header is a login this registry knows."""
        if self.users is None:
            return True
        kind, _, token = (header or "").partition(" ")
        if kind.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(token).decode().partition(":")
        except ValueError:
            return False
        return self.users.get(user) == password

    def _blob(self, digest: str) -> bytes:
        algorithm, _, hexdigest = digest.partition(":")
        return (self.layout / "blobs" / algorithm / hexdigest).read_bytes()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not registry.allows(self.headers.get("Authorization")):
                    registry.sent["refused"] += 1
                    error = {"errors": [{"code": "UNAUTHORIZED",
                                         "message": "authentication required"}]}
                    return self._send(401, json.dumps(error).encode(), "application/json")
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts == ["v2"]:
                    return self._send(200, b"{}", "application/json")
                if len(parts) >= 4 and parts[-2] == "manifests":
                    found = registry._manifest(parts[-1])
                    if found is not None:
                        registry.sent["manifest"] += 1
                        return self._send(200, *found)
                if len(parts) >= 4 and parts[-2] == "blobs":
                    try:
                        body = registry._blob(parts[-1])
                    except OSError:
                        body = None
                    if body is not None:
                        registry.sent["blob"] += 1
                        return self._send(200, body, "application/octet-stream")
                error = {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}
                return self._send(404, json.dumps(error).encode(), "application/json")

            do_HEAD = do_GET

            def _send(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Docker-Distribution-API-Version", "registry/2.0")
                if code == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="test-registry"')
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


class HungRegistry:
    """Accepts every connection on 127.0.0.1:`port` and never answers one, until `close`."""

    def __init__(self, port: int = 0) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.host = f"localhost:{self.port}"
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.accepted += 1
            self._conns.append(conn)  # held open, never read or written

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):  # wakes the accept, which holds the socket
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for conn in self._conns:
            conn.close()
