"""Task start latency: scheduled → running for a task with an image (overlay root + crun).

Builds a small image from busybox-static (no network) in a temporary state root, imports it
into the node's image store, then N times, interleaved (the order rotates each round so each
runner follows each other equally often; between runs the previous one's leftovers, such as
podman's asynchronous `container cleanup`, are waited out, outside the numbers):
  1. ours: `ContainerRuntime.start(launch)` of a task on that image, the real node path
     (image resolve, overlay mount, OCI config, its network namespace taken from the node's
     spare pool, supervisor, `crun create` while its nftables elements go in, then the start:
     crun's exec fifo released by the supervisor, docs/runtime.md), as a tenant's own uid;
  2. bare: `crun run` of the same OCI config on the same unpacked rootfs (read-only lower dir,
     no overlay, no supervisor, a new empty network namespace made by crun), one synchronous
     process; and the same without the task's seccomp filter (`linux.seccomp`,
     docs/runtime.md), to show what the filter costs;
  2b. ours and bare in the host's network namespace (`hostNetwork`), to show what a network
     of its own costs each, and ours on a node that keeps no spare namespaces (each start makes
     its own: `ip netns add` and the CNI plugins on the path);
  3. podman (when installed): `podman run --rm --network none` of the same image.

"Scheduled" is the moment the runtime is asked (just before `start()` / spawning crun or
podman). "Running" is the moment the task's first instruction runs inside its container: the
command is `echo $EPOCHREALTIME > /output/ready`, so the container's own shell reads the clock
(CLOCK_REALTIME, shared with the host: no time namespace) as its first act and we read the
value back afterwards. Polling and waiting in the bench do not enter the numbers. For ours the
runtime's own report (`started`, written by the supervisor once the container is started)
and the time `start()` took to return are printed too.

With `--exec-too`, ours is also run with a freshly exec'd Python supervisor per task (no
zygote: the path before the zygote, and the fallback), in the same interleaved loop.

Usage: .venv/bin/python bench/task_start.py [--runs 100] [--runtime crun|runc] [--no-podman]
       [--exec-too]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from gpuyard.model.tenant import tenant_uid
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.oci import build_config
from gpuyard.runtime.rootfs import Rootfs, tmpfs
from gpuyard.runtime.tasknet import POOL_SIZE, NetConfig
from gpuyard.runtime.types import TaskLaunch, TaskPhase

BUSYBOX = Path("/bin/busybox")
IMAGE = "bench-busybox:1"
COMMAND = "echo $EPOCHREALTIME > /output/ready"
WARMUP = 3
TENANT_UID = tenant_uid(0)  # tasks run as a tenant's own uid (issue 15, item 2)
SPARELESS_SUBNET = "10.212.255.0/24"  # the second node's (the first has the default)
POOL_WAIT_S = 5.0  # before a run, outside the numbers: the node's spare namespaces are made
WAIT_S = 30.0
SETTLE_S = 0.05  # between runs, outside the numbers: the previous run's exits finish first
PODMAN_CONF = (
    '[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
    'netns = "none"\nlog_driver = "k8s-file"\n[engine]\nevents_logger = "none"\n'
    'cgroup_manager = "cgroupfs"\n'
)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def hard_limit(which: int, cap: int = 65536) -> int:
    """`cap`, or this process's hard limit if lower (podman's defaults exceed it here)."""
    hard = resource.getrlimit(which)[1]
    return cap if hard == resource.RLIM_INFINITY else min(cap, hard)


def build_rootfs_tar(base: Path) -> Path:
    root = base / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for applet in ("sh", "echo", "cat", "true", "sleep"):
        (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    tar_path = base / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname=".")
    return tar_path


def read_marker(output: Path) -> float:
    marker = output / "ready"
    value = float(marker.read_text().strip())
    marker.unlink()
    return value


def launch(key: str, output: Path, image: str | None = IMAGE, seccomp: str = "default",
           network: str = "isolated") -> TaskLaunch:
    return TaskLaunch(
        key=key, job_id="bench", job_name="bench", role="main", index=0, attempt=1,
        command=COMMAND, cpu=1.0, memory_mb=256, output_dir=str(output), image=image,
        seccomp=seccomp, storage_roots=(str(output),),  # /output is walked beneath it
        network=network, run_as=(TENANT_UID, TENANT_UID),
    )


class Ours:
    """Tasks through the node's ContainerRuntime; waits on its start/exit hints."""

    def __init__(self, rt: ContainerRuntime, output: Path, seccomp: str = "default",
                 network: str = "isolated") -> None:
        self.rt, self.output, self.seccomp, self.network = rt, output, seccomp, network
        self.changed = threading.Event()
        rt.watch(self.changed.set)
        self.returned: list[float] = []
        self.reported: list[float] = []
        self.recorded: list[float] = []  # supervisor.pid written (mtime)
        self.created: list[float] = []  # container.pid written by `<rt> create` (mtime)

    def settle(self) -> None:
        """Wait (outside the numbers) until the node's spare namespaces are made again: their
        CNI plugins would otherwise run during the next runner's start."""
        pool = self.rt.network.pool
        deadline = time.monotonic() + POOL_WAIT_S
        while len(pool.records()) < POOL_SIZE and time.monotonic() < deadline:
            time.sleep(0.01)

    def reset(self) -> None:
        """Forget the warm-up runs."""
        for xs in (self.returned, self.reported, self.recorded, self.created):
            xs.clear()

    def clean_up(self) -> None:
        """Stop and remove what a failed run left (never leave a mounted root behind)."""
        for key in list(self.rt.keys()):
            self.rt.stop(key, 0)
            deadline = time.monotonic() + WAIT_S
            while self.rt.status(key).phase != TaskPhase.EXITED and time.monotonic() < deadline:
                time.sleep(0.05)
            self.rt.remove(key)
        self.rt.close()

    def wait_exit(self, key: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            st = self.rt.status(key)
            if st.phase == TaskPhase.EXITED:
                if st.exit is None or st.exit.exit_code != 0:
                    raise RuntimeError(f"task {key} failed: {st.exit}")
                return
            self.changed.wait(0.05)
            self.changed.clear()
        raise RuntimeError(f"task {key} did not end within {WAIT_S:g}s")

    def run(self, i: int) -> float:
        key = f"bench-{self.seccomp}-{self.network}-{os.getpid()}-{i}"
        t0 = time.time()
        self.rt.start(launch(key, self.output, seccomp=self.seccomp, network=self.network))
        t_returned = time.time()
        self.wait_exit(key)
        started_at = self.rt.status(key).started_at or float("nan")
        td = self.rt.task_dir(key)
        self.recorded.append(td.pid_file.stat().st_mtime - t0)
        self.created.append(td.container_pid.stat().st_mtime - t0)
        self.rt.remove(key)
        ran = read_marker(self.output)
        self.returned.append(t_returned - t0)
        self.reported.append(started_at - t0)
        return ran - t0


class Bare:
    """`crun run` of the same config on the unpacked lower dir (read-only, no overlay)."""

    def __init__(self, rt: ContainerRuntime, base: Path, output: Path,
                 seccomp: str = "default", network: str = "isolated") -> None:
        self.seccomp = seccomp  # "unconfined": the same config without the syscall filter
        self.network = network  # "host": the host's network namespace, else a new empty one
        image = rt.images.resolve(IMAGE)
        self.rootfs = Rootfs(image.lower, readonly=True, mounts=(tmpfs("/tmp", "mode=1777"),),
                             image=image.config)
        self.rt, self.base, self.output = rt.rt, base, output

    def run(self, i: int) -> float:
        key = f"bare-{os.getpid()}-{i}"
        bundle = self.base / key
        (bundle / "work").mkdir(parents=True)
        task = launch(key, self.output, seccomp=self.seccomp, network=self.network)
        config = build_config(task, self.rootfs,
                              bundle / "work", pinned={"outputDir": str(self.output)})
        (bundle / "config.json").write_text(json.dumps(config))
        t0 = time.time()
        done = subprocess.run(self.rt.command("run", "--bundle", str(bundle), key),
                              stdin=subprocess.DEVNULL, capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"bare {self.rt.name} run failed: {done.stderr.decode()[-500:]}")
        shutil.rmtree(bundle)
        return read_marker(self.output) - t0


class Podman:
    """`podman run --rm --network none` of the same image, in a private podman store."""

    def __init__(self, podman: str, base: Path, rootfs_tar: Path, output: Path) -> None:
        base.mkdir()
        conf = base / "containers.conf"
        conf.write_text(PODMAN_CONF.format(nofile=hard_limit(resource.RLIMIT_NOFILE),
                                           nproc=hard_limit(resource.RLIMIT_NPROC, 4096)))
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.cmd = [podman, "--root", str(base / "storage"), "--runroot", str(base / "run"),
                    "--storage-driver", "overlay"]
        self.output, self.base = output, base
        subprocess.run([*self.cmd, "import", "--quiet", str(rootfs_tar), f"localhost/{IMAGE}"],
                       env=self.env, capture_output=True, check=True)

    def run(self, i: int) -> float:
        t0 = time.time()
        done = subprocess.run(
            [*self.cmd, "run", "--rm", "--network", "none", "-v", f"{self.output}:/output",
             f"localhost/{IMAGE}", "/bin/sh", "-c", COMMAND],
            env=self.env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"podman run failed: {done.stderr.decode()[-800:]}")
        ran = read_marker(self.output) - t0
        wait_gone(self.base)  # conmon runs `podman container cleanup` after `run` returns
        return ran

    def close(self) -> None:
        subprocess.run([*self.cmd, "system", "reset", "--force"], env=self.env,
                       capture_output=True, check=False)


def wait_gone(marker: Path, limit_s: float = 10.0) -> None:
    """Wait until no process has `marker` in its command line (a runner's leftovers, such as
    podman's asynchronous cleanup, would otherwise run during the next runner's start)."""
    needle = str(marker).encode()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not any(needle in cmdline for cmdline in cmdlines()):
            return
        time.sleep(0.01)


def cmdlines() -> list[bytes]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                found.append((proc / "cmdline").read_bytes())
            except OSError:
                continue  # it ended while we looked
    return found


def row(name: str, xs: list[float], base: float | None) -> str:
    p50, p95 = pct(xs, 50), pct(xs, 95)
    ratio = f"{p50 / base:5.2f}x" if base else "     "
    return f"{name:<44} {p50 * 1000:8.1f} ms {p95 * 1000:8.1f} ms   {ratio}"


def network_runners(runners: dict, rt: ContainerRuntime, base: Path, output: Path,
                    rootfs_tar: Path) -> list[Ours]:
    """Ours and bare in the host's network (what a network of its own costs each), and ours on
    a node without spare namespaces (what they save): added to `runners`; the new nodes."""
    hostnet = Ours(rt, output, network="host")
    barehost = Bare(rt, base / "barehost", output, network="host")
    spareless = ContainerRuntime(base / "spareless", runtime=rt.name,
                                 network=replace(NetConfig.of(SPARELESS_SUBNET), spares=0))
    spareless.images.import_file(rootfs_tar, IMAGE)
    cold = Ours(spareless, output)
    runners.update(hostnet=hostnet.run, barehost=barehost.run, cold=cold.run)
    return [hostnet, cold]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--runtime", default="crun")
    ap.add_argument("--no-podman", action="store_true")
    ap.add_argument("--exec-too", action="store_true",
                    help="also ours with an exec'd Python supervisor per task (the old path)")
    args = ap.parse_args()
    if os.geteuid() != 0 or not BUSYBOX.exists():
        print("needs root and busybox-static (make system)", file=sys.stderr)
        return 2
    podman_bin = None if args.no_podman else shutil.which("podman")
    with tempfile.TemporaryDirectory(prefix="gpuyard-taskstart-") as tmp:
        base = Path(tmp)
        output = base / "output"
        output.mkdir()
        os.chown(output, TENANT_UID, TENANT_UID)  # the tasks' uid writes its marker there
        rootfs_tar = build_rootfs_tar(base)
        rt = ContainerRuntime(base / "state", runtime=args.runtime)
        rt.images.import_file(rootfs_tar, IMAGE)
        rt.network.ensure()
        rt.network.pool.wake()  # the spare namespaces, made as a node makes them after a start
        ours, bare = Ours(rt, output), Bare(rt, base / "bare", output)
        plain = Bare(rt, base / "plain", output, seccomp="unconfined")
        free = Ours(rt, output, seccomp="unconfined")  # what the filter costs ours
        runners = {"ours": ours.run, "bare": bare.run, "plain": plain.run, "free": free.run}
        nodes = [ours, free, *network_runners(runners, rt, base, output, rootfs_tar)]
        if args.exec_too:
            slow = ContainerRuntime(base / "slow", runtime=args.runtime, fork_supervisors=False)
            slow.images.import_file(rootfs_tar, IMAGE)
            nodes.append(Ours(slow, output))
            runners["exec"] = nodes[-1].run
        podman = Podman(podman_bin, base / "podman", rootfs_tar, output) if podman_bin else None
        if podman:
            runners["podman"] = podman.run
        samples: dict[str, list[float]] = {name: [] for name in runners}
        try:
            for i in range(WARMUP + args.runs):
                if i == WARMUP:
                    ours.reset()
                names = list(runners)
                for name in names[i % len(names):] + names[:i % len(names)]:  # each follows each
                    ours.settle()
                    value = runners[name](i)
                    time.sleep(SETTLE_S)
                    if i >= WARMUP:
                        samples[name].append(value)
        finally:
            for node in nodes:
                node.clean_up()
            if podman:
                podman.close()
        report(args, rt, samples, ours)
    return 0


def report(args: argparse.Namespace, rt: ContainerRuntime, samples: dict[str, list[float]],
           ours: Ours) -> None:
    base = pct(samples["bare"], 50)
    print(f"task start latency, N = {args.runs} each (+{WARMUP} warm-up), interleaved; "
          f"{platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
          f"Python {platform.python_version()}, {rt.name} at {rt.rt.path}")
    print(f"{'scheduled -> running (first instruction)':<44} {'p50':>11} {'p95':>11}   vs bare")
    print(row(f"ours: image + overlay + {rt.name} (start())", samples["ours"], base))
    print(row(f"bare: {rt.name} run, same config and rootfs", samples["bare"], base))
    print(row(f"bare {rt.name} run without the seccomp filter", samples["plain"], base))
    print(row("ours without the seccomp filter", samples["free"], base))
    print(row("ours in the host's network (hostNetwork)", samples["hostnet"], base))
    print(row(f"bare {rt.name} run in the host's network", samples["barehost"], base))
    print(row("ours, no spare namespaces (made per start)", samples["cold"], base))
    plain = pct(samples["plain"], 50)
    print(f"ours / bare without the filter: {pct(samples['ours'], 50) / plain:.2f}x")
    if "exec" in samples:
        print(row("ours, exec'd Python supervisor (no zygote)", samples["exec"], base))
    if "podman" in samples:
        print(row("podman run --rm --network none", samples["podman"], base))
    print("where ours' time goes (from scheduled; file mtimes and the supervisor's clock):")
    print(row("  supervisor recorded (zygote wrote its pid)", ours.recorded, None))
    print(row("  start() returned", ours.returned, None))
    print(row(f"  {rt.name} create done (init pid written)", ours.created, None))
    print(row("  first instruction (after the start)", samples["ours"], None))
    print(row("  runtime's own report (started file)", ours.reported, None))
    print(f"mean ours {statistics.mean(samples['ours']) * 1000:.1f} ms, "
          f"bare {statistics.mean(samples['bare']) * 1000:.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
