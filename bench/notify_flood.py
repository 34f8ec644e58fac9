"""Notify flood: what a process flooding the node's notify channel costs the server.

Starts `gpuyard up` (fake GPUs, a temporary data dir), measures the server process' CPU
(utime + stime from /proc) and its controller cycles (`gpuyard_controller_cycle_seconds_count`
on /metrics) for `--seconds` idle, then for `--seconds` while another process floods the
notify socket without blocking: it connects as root (a task that somehow holds the socket;
tasks cannot reach it, docs/runtime.md) and then drops to uid 65534, so its datagrams carry a
task's credentials. The socket is the one the running code has: `<state root>/run/notify.sock`
(or its short fallback), else the abstract name of the code before (run with PYTHONPATH set
to an older checkout's `src` to measure that one).

Usage: .venv/bin/python bench/notify_flood.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

NOBODY = 65534
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def start_server(data: Path, port: int) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "gpuyard", "up", "--port", str(port), "--data-dir", str(data)]
    args += ["--fake-gpus", "1xA100-80GB"]
    log = open(data.parent / "server.log", "wb")  # noqa: SIM115 - the child's
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("the server did not come up")


def channel(state_root: Path) -> bytes:
    root = state_root.resolve()
    path = root / "run" / "notify.sock"
    if len(str(path)) > 107:
        path = Path("/run/gpuyard/notify") / f"{hashlib.sha256(bytes(root)).hexdigest()[:24]}.sock"
    if path.exists():
        return bytes(path)
    return b"\0gpuyard-notify-" + hashlib.sha256(str(root).encode()).hexdigest()[:24].encode()


def flood(address: bytes, seconds: float) -> int:
    """Fork a flooder (connected as root, then uid 65534) for `seconds`; its pid."""
    pid = os.fork()
    if pid:
        return pid
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.connect(address)
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    sock.setblocking(False)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            sock.send(b"exited flood")
        except BlockingIOError:
            time.sleep(0)
    os._exit(0)


def cycles(port: int, token: str) -> float:
    r = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"})
    line = next(
        x for x in r.text.splitlines() if x.startswith("gpuyard_controller_cycle_seconds_count")
    )
    return float(line.split()[-1])


def window(
    proc: subprocess.Popen[bytes], port: int, token: str, seconds: float
) -> tuple[float, float]:
    """(server CPU %, controller cycles per second) over `seconds` from now."""
    cpu0, cyc0, t0 = cpu_s(proc.pid), cycles(port, token), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    return 100 * (cpu_s(proc.pid) - cpu0) / elapsed, (cycles(port, token) - cyc0) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gy-flood-") as tmp:
        data = Path(tmp) / "data"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = start_server(data, port)
        try:
            token = (data / "admin-token").read_text().strip()
            time.sleep(2)  # start-up settles
            idle = window(proc, port, token, args.seconds)
            flooder = flood(channel(data / "node"), args.seconds + 1)
            flooded = window(proc, port, token, args.seconds)
            os.waitpid(flooder, 0)
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(30)
    print(f"idle:    server CPU {idle[0]:5.1f} %, {idle[1]:6.1f} controller cycles/s")
    print(f"flooded: server CPU {flooded[0]:5.1f} %, {flooded[1]:6.1f} controller cycles/s")


if __name__ == "__main__":
    main()
