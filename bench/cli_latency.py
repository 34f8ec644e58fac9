"""Wall time of `gpuyard` client commands against a real server, with baselines in the same
run: `python -c pass` (the interpreter's own start) and `curl` of the same endpoints (the
server's share of a call).

Starts a real `gpuyard up` (fake GPUs, a fresh data dir) unless `--url` names one (then
`GPUYARD_TOKEN` must be set), submits a few jobs so that `gpuyard jobs` has rows, then runs
every command `--rounds` times, interleaved (one of each per round, in a shuffled order), and
prints p50 / p95 / max wall milliseconds per command, and the p50 of the CPU time the command
itself used (user + system: what the machine's other load does not inflate as much).

With `--before SRC` (another checkout's `src`, e.g. `git archive OLD src | tar -x -C
/tmp/old`), the same client commands run from that code too (PYTHONPATH), in the same rounds,
so before and after share the machine's load.

Usage: .venv/bin/python bench/cli_latency.py [--rounds 30] [--url URL] [--before SRC] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
SPEC = """name: bench-cli
taskRoles:
  main:
    cpuNumber: 0.1
    memoryMB: 64
    command: 'true'
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """A `gpuyard up` on a free port; (process, URL, the admin's token)."""
    port = free_port()
    args = [str(BIN / "gpuyard"), "up", "--port", str(port), "--data-dir", str(data / "data"),
            "--fake-gpus", "4xA100-80GB", "--storage-root", str(data / "root")]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return proc, url, (data / "data" / "admin-token").read_text().strip()
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("gpuyard up exited; run it by hand to see why") from None
            time.sleep(0.1)
    raise SystemExit("server did not start")


Table = dict[str, tuple[list[str], dict[str, str]]]


def commands(url: str, token: str, spec: Path, before: str | None) -> Table:
    """Name → (argv, environment added); baselines first."""
    table = {name: (argv, {}) for name, argv in argvs(url, token, spec).items()}
    if before:
        table |= {f"{name} [before]": (argv, {"PYTHONPATH": before})
                  for name, argv in argvs(url, token, spec).items() if name.startswith("gpuyard")}
    return table


def argvs(url: str, token: str, spec: Path) -> dict[str, list[str]]:
    """Name → argv; baselines first."""
    gpuyard = str(BIN / "gpuyard")
    auth = f"Authorization: Bearer {token}"
    table = {"python -c pass (baseline)": [sys.executable, "-c", "pass"]}
    if shutil.which("curl"):
        table |= {
            "curl GET /api/v1/jobs (baseline)": ["curl", "-sf", "-o", "/dev/null", "-H", auth,
                                                 f"{url}/api/v1/jobs"],
            "curl POST /api/v1/jobs (baseline)": [
                "curl", "-sf", "-o", "/dev/null", "-H", auth, "-H",
                "Content-Type: application/yaml", "--data-binary", f"@{spec}",
                f"{url}/api/v1/jobs"],
        }
    return table | {
        "gpuyard jobs": [gpuyard, "jobs"],
        "gpuyard jobs -o json": [gpuyard, "jobs", "-o", "json"],
        "gpuyard submit FILE": [gpuyard, "submit", str(spec)],
        "gpuyard --help": [gpuyard, "--help"],
        "gpuyard nodes (full CLI)": [gpuyard, "nodes"],
    }


def cpu_s() -> float:
    """CPU seconds (user + system) of this process's ended children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall_ms(argv: list[str], env: dict[str, str]) -> float:
    return timed(argv, env)[0]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of `argv`, which must exit 0."""
    cpu, start = cpu_s(), time.perf_counter()
    done = subprocess.run(
        argv, check=False, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed, (cpu_s() - cpu) * 1000


def measure(table: Table, env: dict[str, str], rounds: int) -> dict[str, list[tuple]]:
    """Every command once per round, in a shuffled order; 2 warm-up rounds not kept."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in table}
    rng = random.Random(0)
    for n in range(rounds + 2):
        names = list(table)
        rng.shuffle(names)
        for name in names:
            argv, extra = table[name]
            sample = timed(argv, env | extra)
            if n >= 2:
                times[name].append(sample)
    return times


def summary(times: dict[str, list[tuple[float, float]]]) -> dict[str, dict[str, float]]:
    """Wall p50 / p95 / max and the command's own CPU time p50, in ms."""
    out = {}
    for name, samples in times.items():
        ordered = sorted(wall for wall, _ in samples)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        out[name] = {"p50": statistics.median(ordered), "p95": p95, "max": ordered[-1],
                     "cpu_p50": statistics.median(cpu for _, cpu in samples)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--url", help="a running server (GPUYARD_TOKEN must be set)")
    parser.add_argument("--before", help="another checkout's src dir, run side by side")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuyard-cli-bench-") as tmp:
        work = Path(tmp)
        proc = None
        if args.url:
            url, token = args.url, os.environ["GPUYARD_TOKEN"]
        else:
            proc, url, token = start_server(work)
        try:
            spec = work / "job.yaml"
            spec.write_text(SPEC)
            env = os.environ | {"GPUYARD_URL": url, "GPUYARD_TOKEN": token,
                                "XDG_CONFIG_HOME": str(work / "config"), "NO_COLOR": "1"}
            table = commands(url, token, spec, args.before)
            for _ in range(10):  # rows for `gpuyard jobs`
                wall_ms(table["gpuyard submit FILE"][0], env)
            result = summary(measure(table, env, args.rounds))
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    report(result, args)


def report(result: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps({"machine": machine(), "rounds": args.rounds, "wall_ms": result},
                         indent=2))
        return
    print(f"{machine()}; {args.rounds} rounds, interleaved")
    print(f"{'command':<45} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'CPU p50':>8}")
    for name, row in result.items():
        print(f"{name:<45} {row['p50']:8.1f} {row['p95']:8.1f} {row['max']:8.1f}"
              f" {row['cpu_p50']:8.1f}")


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"load average at the end {load}")


if __name__ == "__main__":
    main()
