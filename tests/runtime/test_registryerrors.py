"""The transient/permanent table of failed pulls: on skopeo's own words, captured from the
installed skopeo (1.9.3) and, for the HTTP statuses, produced by it for real against a
registry on 127.0.0.1 that answers each status."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuyard.runtime.registryerrors import classify

CAPTURED = [  # (skopeo's message, transient?, kind)
    ('initializing source docker://localhost:1/img:tag: pinging container registry localhost:1: '
     'Get "https://localhost:1/v2/": dial tcp 127.0.0.1:1: connect: connection refused',
     True, "connection refused"),
    ('initializing source docker://localhost:5201/img:tag: pinging container registry '
     'localhost:5201: Get "https://localhost:5201/v2/": net/http: TLS handshake timeout',
     True, "timeout"),
    ("skopeo copy timed out after 605s", True, "timeout"),
    ('initializing source docker://reg.example/img:1: pinging container registry reg.example: '
     'Get "https://reg.example/v2/": dial tcp: lookup reg.example on 10.255.255.53:53: server '
     "misbehaving", True, "DNS failure"),
    ("initializing source docker://localhost:5103/img:tag: reading manifest tag in "
     "localhost:5103/img: StatusCode: 429, oops", True, "rate limited (429)"),
    ("reading blob sha256:ab: Get \"https://r.example/v2/x/blobs/sha256:ab\": read tcp "
     "10.0.0.2:4455->10.0.0.9:443: read: connection reset by peer", True, "connection reset"),
    ('initializing source docker://no-such-host.invalid/img:tag: pinging container registry '
     'no-such-host.invalid: Get "https://no-such-host.invalid/v2/": dial tcp: lookup '
     "no-such-host.invalid on 10.255.255.53:53: no such host", False, "unknown registry host"),
    ("Invalid source name docker://Bad_Ref/IMG:tag: invalid reference format: repository name "
     "must be lowercase", False, "bad reference"),
    ('initializing source docker://localhost:5301/img:tag: pinging container registry '
     'localhost:5301: Get "https://localhost:5301/v2/": tls: first record does not look like a '
     "TLS handshake", False, "TLS set-up (an insecure registry needs GPUYARD_INSECURE_REGISTRIES)"),
    ("initializing source docker://docker.io/library/nosuch:1: reading manifest 1 in "
     "docker.io/library/nosuch: requested access to the resource is denied", False,
     "unauthorized"),
    ("umoci unpack failed: no space left on device", False, "unknown"),
]


@pytest.mark.parametrize(("message", "transient", "kind"), CAPTURED)
def test_captured_skopeo_messages(message: str, transient: bool, kind: str) -> None:
    name = message.split("docker://", 1)[1].split(": ", 1)[0] if "docker://" in message else ""
    assert classify(message, name) == (transient, kind)


def test_the_image_name_cannot_change_the_verdict() -> None:
    refused = ("initializing source docker://localhost:1/unauthorized/timeout:1: pinging "
               "container registry localhost:1: dial tcp 127.0.0.1:1: connect: connection refused")
    assert classify(refused, "localhost:1/unauthorized/timeout:1") == (True, "connection refused")
    unknown = ("initializing source docker://time:1: reading manifest 1 in "
               "docker.io/library/time: manifest unknown")
    assert classify(unknown, "time:1") == (False, "unknown image or manifest")
    timed = "initializing source docker://time:1: reading manifest 1 in docker.io/library/time: timed out"
    assert classify(timed, "time:1") == (True, "timeout")


class _Status(BaseHTTPRequestHandler):
    status = 500

    def do_GET(self) -> None:
        if self.path == "/v2/":
            code, body = 200, b"{}"
        else:
            code = self.status
            errors = {404: "MANIFEST_UNKNOWN", 401: "UNAUTHORIZED", 403: "DENIED"}
            body = json.dumps({"errors": [{"code": errors.get(code, "X"), "message": "m"}]}).encode()
        self.send_response(code)
        if code == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="r"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(("status", "transient", "kind"), [
    (500, True, "registry error (5xx)"),
    (503, True, "registry error (5xx)"),
    (502, True, "registry error (5xx)"),
    (404, False, "unknown image or manifest"),
    (401, False, "unauthorized"),
    (403, False, "unauthorized"),
])
def test_real_skopeo_against_each_status(status: int, transient: bool, kind: str,
                                         tmp_path: Path) -> None:
    if shutil.which("skopeo") is None:
        pytest.skip("skopeo is not installed (make system)")
    handler = type("Handler", (_Status,), {"status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    name = f"localhost:{server.server_address[1]}/img:1"
    try:
        done = subprocess.run(
            ["skopeo", "--insecure-policy", "copy", "--quiet", "--src-tls-verify=false",
             f"docker://{name}", f"oci:{tmp_path / 'layout'}:x"],
            capture_output=True, text=True, timeout=60, check=False)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode != 0
    assert classify(done.stderr.strip().splitlines()[-1], name) == (transient, kind), done.stderr
