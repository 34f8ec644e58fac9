"""Exec round trip (issue 19): `gpuyard exec JOB -- true` against `crun exec` of the same
container, in the same run (goal: p50 ≤ 3× crun exec's).

Starts a real `gpuyard up` (local engine, 4 fake GPUs, crun; a fresh data dir and a task
subnet of its own), submits one job (`sleep`) and waits until it runs, then does `--rounds`
rounds (3 warm-up rounds not kept), each runner once per round in a rotating order, so each
follows each other equally often and all share the machine's load:

- `gpuyard exec JOB -- true`: the real CLI (the `gpuyard` console script of this venv), wall
  time from spawn to exit; it must exit 0;
- `crun exec` (the baseline): the command the node itself runs for that exec
  (`<rt> exec --process P --pid-file F CONTAINER`, P the task's own process with `true` as its
  arguments: `runtime/taskexec.py`), spawned from here, wall time to exit;
- in-process WebSocket client: what the CLI does after its start-up (`tunnel.open_exec` and
  `interact`, the same code), from this already-running process: the server's part of an exec
  plus the network, without the CLI's interpreter start and imports;
- what the CLI's start-up is made of: `python -c pass` (the interpreter), `import
  gpuyard.cli.fastexec` (it and every import of the exec CLI), the same without
  `gpuyard.cli.fast` (`import argparse, gpuyard.cli.tunnel`: what `fastexec` would cost if its
  `fail` did not come from the module that imports `http.client`), and `import wsproto`.

Every Python command runs with its bytecode cached (`PYTHONPYCACHEPREFIX` in the bench's temp
dir, written in the warm-up rounds), whatever `PYTHONDONTWRITEBYTECODE` says here: an
installed gpuyard has its `.pyc` files.

So CLI − in-process is the CLI's own start-up and exit, and in-process − crun exec is what the
server adds to the runtime's exec (auth, the job's event, the node call, the frames). Printed:
wall p50 / p95 / max and the p50 of CPU time (the spawned command's own, user + system; for
the in-process client the server's CPU during the call, from /proc).

Usage: .venv/bin/python bench/exec_latency.py [--rounds 100] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from cli_latency import start_server

from gpuyard.cli.tunnel import interact, open_exec
from gpuyard.runtime.taskdir import TaskDir, write_json
from gpuyard.runtime.taskexec import ExecRequest, exec_process, running_task

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from tasknetworks import nodes_under, random_subnets, remove_node_network  # noqa: E402

BIN = Path(sys.executable).parent
SPEC = """name: bench-exec
taskRoles:
  main:
    cpuNumber: 0.2
    memoryMB: 64
    command: sleep 3600
"""
WARMUP = 3
IMPORTS = (
    "pass",
    "import gpuyard.cli.fastexec",
    "import argparse, gpuyard.cli.tunnel",
    "import wsproto",
)
TICK = os.sysconf("SC_CLK_TCK")

Sample = tuple[float, float]  # (wall ms, CPU ms)


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (not its children's)


def spawned(argv: list[str], env: dict[str, str]) -> Callable[[], Sample]:
    """A runner: one run of `argv`, which must exit 0."""

    def run() -> Sample:
        cpu, start = children_cpu_s(), time.perf_counter()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              check=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
        return wall * 1000, (children_cpu_s() - cpu) * 1000

    return run


def in_process(url: str, token: str, job: str, server_pid: int) -> Callable[[], Sample]:
    """A runner: the CLI's own exec code (`run_exec` after argument parsing), in this process."""

    def run() -> Sample:
        cpu, start = process_cpu_s(server_pid), time.perf_counter()
        code = interact(open_exec(url, token, job, None, ["true"], False), False, False)
        wall = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"in-process exec exited {code}")
        return wall * 1000, (process_cpu_s(server_pid) - cpu) * 1000

    return run


def crun_exec(task_dir: Path, scratch: Path) -> list[str]:
    """The node's own `<rt> exec` of `true` in the task (runtime/taskexec.py's arguments)."""
    rt, container, config = running_task(TaskDir(task_dir))
    process = scratch / "process.json"
    write_json(process, exec_process(config, ExecRequest(("true",))))
    return rt.command("exec", "--process", str(process), "--pid-file", str(scratch / "pid"),
                      container)


def wait_running(url: str, token: str, spec: str) -> str:
    """The job's id, once its task runs."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                      timeout=30) as http:
        r = http.post("/api/v1/jobs", content=spec,
                      headers={"Content-Type": "application/yaml"})
        r.raise_for_status()
        job = r.json()["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            doc = http.get(f"/api/v1/jobs/{job}").json()
            if doc["state"] == "RUNNING":
                return job
            if doc["state"] in ("FAILED", "STOPPED", "SUCCEEDED"):
                raise SystemExit(f"the job ended: {doc}")
            time.sleep(0.2)
        raise SystemExit(f"the job did not run within 60 s: {doc}")


def measure(runners: dict[str, Callable[[], Sample]], rounds: int) -> dict[str, list[Sample]]:
    names = list(runners)
    samples: dict[str, list[Sample]] = {name: [] for name in names}
    for n in range(rounds + WARMUP):
        shift = n % len(names)
        for name in names[shift:] + names[:shift]:
            sample = runners[name]()
            if n >= WARMUP:
                samples[name].append(sample)
    return samples


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def summary(samples: dict[str, list[Sample]]) -> dict[str, dict[str, float]]:
    out = {}
    for name, got in samples.items():
        walls = [w for w, _ in got]
        out[name] = {"p50": statistics.median(walls), "p95": pct(walls, 95), "max": max(walls),
                     "cpu_p50": statistics.median(c for _, c in got)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ["GPUYARD_TASK_SUBNET"] = random_subnets()[0]  # not another server's
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gpuyard-exec-bench-") as tmp:
        work = Path(tmp)
        proc, url, token = start_server(work)
        try:
            job = wait_running(url, token, SPEC)
            [task_dir] = (work / "data" / "node" / "tasks").iterdir()  # the node's one task
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env |= {"GPUYARD_URL": url, "GPUYARD_TOKEN": token, "PYTHONPYCACHEPREFIX":
                    str(work / "pycache"), "XDG_CONFIG_HOME": str(work / "config")}
            scratch = work / "crun"
            scratch.mkdir()
            runners = {
                "crun exec (baseline)": spawned(crun_exec(task_dir, scratch), env),
                "gpuyard exec JOB -- true": spawned(
                    [str(BIN / "gpuyard"), "exec", job, "--", "true"], env),
                "in-process WebSocket exec": in_process(url, token, job, proc.pid),
                **{f"python -c '{code}'": spawned([sys.executable, "-c", code], env)
                   for code in IMPORTS},
            }
            result = summary(measure(runners, args.rounds))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            for tag in nodes_under(work):
                remove_node_network(tag)
    report(result, args, load_before)


def report(result: dict[str, dict[str, float]], args: argparse.Namespace,
           load_before: tuple[float, float, float]) -> None:
    base = result["crun exec (baseline)"]["p50"]
    ratios = {name: row["p50"] / base for name, row in result.items()}
    if args.json:
        print(json.dumps({"machine": machine(load_before), "rounds": args.rounds,
                          "wall_ms": result, "p50_over_crun_exec": ratios}, indent=2))
        return
    print(f"{machine(load_before)}; {args.rounds} rounds, interleaved")
    print(f"{'runner':<50} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'CPU p50':>8} "
          f"{'p50/crun':>8}")
    for name, row in result.items():
        print(f"{name:<50} {row['p50']:8.1f} {row['p95']:8.1f} {row['max']:8.1f}"
              f" {row['cpu_p50']:8.1f} {ratios[name]:7.2f}x")
    cli = result["gpuyard exec JOB -- true"]["p50"]
    ws = result["in-process WebSocket exec"]["p50"]
    print(f"CLI start-up and exit (CLI - in-process, p50): {cli - ws:.1f} ms; "
          f"server's part (in-process - crun exec, p50): {ws - base:.1f} ms")
    verdict = "met" if cli <= 3 * base else "missed"
    print(f"goal p50 <= 3x crun exec: {cli / base:.2f}x, {verdict}")


def machine(load_before: tuple[float, float, float]) -> str:
    crun = "crun ?"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        crun = subprocess.run(["crun", "--version"], capture_output=True, text=True,
                              check=False).stdout.splitlines()[0]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    before = ", ".join(f"{x:.1f}" for x in load_before)
    return (f"{platform.node()}: {platform.machine()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, {crun}; load average before {before}, after {load}")


if __name__ == "__main__":
    main()
