"""What the network tests put around a task: listeners on the host, an "outside" that stands
for the internet and the cloud metadata service, and a probe that runs inside the task.

- `HostListener`: a TCP listener of the test process on 0.0.0.0 (so on 127.0.0.1, the host's
  own addresses and the task bridge's gateway address): the API port, and any 127.0.0.1
  service. It answers `host` and counts who came.
- `Outside`: a network namespace the test makes (`ip netns add` + a veth pair, documentation
  addresses only), holding 198.51.100.7 (TEST-NET-2: "the internet") and 169.254.169.254 (the
  metadata address) on its loopback, with a server answering `outside` on port 80; the host
  routes those two /32s to it while the test runs. No real internet or metadata service is
  used, and nothing of the host's own routes is changed.
- `probe_command`: a shell command that connects to each target at once (2 s each) and prints
  one JSON line: target → what it read (the banner; for a server that says nothing first, the
  status line of its answer to `GET /healthz`), or the error.
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import threading
import time

INTERNET = "198.51.100.7"
METADATA = "169.254.169.254"
OUTSIDE_PORT = 80

PROBE = r"""
import json, socket, sys, threading
targets, out = json.loads(bytes.fromhex(sys.argv[1])), {}
def probe(name, host, port):
    try:
        with socket.create_connection((host, port), timeout=2) as s:
            s.settimeout(1)
            try:
                said = s.recv(64)
            except socket.timeout:  # a server that waits to be asked: an HTTP one, the API
                s.settimeout(2)
                s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
                said = s.recv(64).split(b"\r\n")[0]
            out[name] = said.decode(errors="replace") or "connected"
    except OSError as e:
        out[name] = "%s: %s" % (type(e).__name__, e.strerror or e)
threads = [threading.Thread(target=probe, args=(n, h, p)) for n, (h, p) in targets.items()]
[t.start() for t in threads]
[t.join() for t in threads]
print("PROBE " + json.dumps(out, sort_keys=True), flush=True)
"""

LISTEN = """
import socket, sys
port, banner, ready = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(16)
open(ready, "w").close() if ready != "-" else print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(banner)
    c.close()
"""


def _py(code: str, *args: str) -> str:
    return f"python3 -c 'exec(bytes.fromhex(\"{code.encode().hex()}\"))' " + " ".join(args)


def probe_command(targets: dict[str, tuple[str, int]]) -> str:
    return _py(PROBE, json.dumps(targets).encode().hex())


def listen_command(port: int, banner: str, ready: str) -> str:
    return _py(LISTEN, str(port), banner, ready)


def probe_result(log: str) -> dict[str, str]:
    lines = [line for line in log.splitlines() if line.startswith("PROBE ")]
    assert lines, f"the probe printed nothing: {log[-2000:]}"
    return json.loads(lines[-1][len("PROBE "):])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_address() -> str:
    """This machine's address on its default route (what other machines reach it at)."""
    out = subprocess.run(["ip", "-j", "-4", "route", "get", INTERNET], capture_output=True,
                         text=True, check=True).stdout
    route = json.loads(out)[0]
    return route.get("prefsrc") or route["src"]


class HostListener:
    """A listener on 0.0.0.0:`port` of the host; `came` counts the connections."""

    def __init__(self, port: int) -> None:
        self.port, self.came = port, 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._halt.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.came += 1
            with conn:
                conn.sendall(b"host")

    def close(self) -> None:
        self._halt.set()
        self._thread.join()
        self.sock.close()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Outside:
    """The stand-in internet and metadata service (see the module's docstring)."""

    def __init__(self) -> None:
        r = secrets.token_hex(3)
        self.ns, self.host_if, self.ns_if = f"gpyt-out-{r}", f"gyo{r}", f"gyi{r}"
        block = secrets.randbelow(64) * 4  # a /30 of TEST-NET-3
        self.host_ip, self.ns_ip = f"203.0.113.{block + 1}", f"203.0.113.{block + 2}"
        self.server: subprocess.Popen[bytes] | None = None
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def _make(self) -> None:
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if,
            "netns", self.ns)
        _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        _ip("link", "set", self.host_if, "up")
        inside = ("-n", self.ns)
        _ip(*inside, "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
        _ip(*inside, "link", "set", self.ns_if, "up")
        _ip(*inside, "link", "set", "lo", "up")
        for address in (INTERNET, METADATA):
            _ip(*inside, "addr", "add", f"{address}/32", "dev", "lo")
            _ip("route", "replace", f"{address}/32", "via", self.ns_ip)
        _ip(*inside, "route", "add", "default", "via", self.host_ip)
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, sys.executable, "-c", LISTEN,
             str(OUTSIDE_PORT), "outside", "-"], stdout=subprocess.PIPE)
        assert self.server.stdout is not None and self.server.stdout.readline() == b"ready\n"

    def close(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server.wait()
        for address in (INTERNET, METADATA):
            subprocess.run(["ip", "route", "del", f"{address}/32", "via", self.ns_ip],
                           capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, check=False)
        deadline = time.monotonic() + 5  # the veth pair goes with the namespace
        while time.monotonic() < deadline and subprocess.run(
            ["ip", "link", "show", self.host_if], capture_output=True, check=False
        ).returncode == 0:
            time.sleep(0.05)
