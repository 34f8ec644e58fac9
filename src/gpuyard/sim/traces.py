"""Trace loaders: Philly 2017 (Sia's CSV), the generic CSV, and per-tenant quotas.

A `Trace` is a list of `TraceJob`s sorted by submission (seconds from the first arrival)
and the GPU quota of each tenant, in nodes of `gpus_per_node` GPUs. See docs/traces.md.

- Philly 2017 (`philly2017_sia_jobs.csv.gz`): Sia's filter (duration ≥ 60 s and
  gpu_time < 1,000 GPU-hours); tenants are the virtual clusters; rows are sorted by
  timestamp (the file is not); jobs of VCs without a Helios size are dropped.
- Generic CSV: `submit_time, duration, num_gpus, tenant, gpu_type` (seconds; gpu_type may
  be empty), optional `user` and `name` (run-time estimates learn from them); the user's
  own history.
- Quotas: `helios` (the Helios VC sizes × 8 GPUs) or `demand:F` (each tenant gets
  ceil(offered GPU load / (F × 8)) nodes, at least its biggest gang).
- `one_tenant`: every job in one tenant, quotas computed on the merged trace; `jittered`:
  each arrival moved later by a seeded offset in [0, S) (docs/sim.md, Seeds).
"""

from __future__ import annotations

import csv
import gzip
import math
import os
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

PHILLY_JOBS = "philly2017_sia_jobs.csv.gz"
PHILLY_VC_NODES = "philly2017_vc_nodes_helios.csv"
TRACE_DIR_ENV = "GPUYARD_TRACE_DIR"
DEFAULT_FLAVOR = "GPU"
GPUS_PER_NODE = 8
MIN_DURATION_S = 60.0
MAX_GPU_TIME_S = 1000 * 3600.0


@dataclass(frozen=True, slots=True)
class TraceJob:
    job_id: str
    submit_s: float  # seconds from the trace's first arrival
    duration_s: float
    gpus: int
    tenant: str
    gpu_type: str = DEFAULT_FLAVOR
    user: str | None = None  # who submitted it, when the trace says (run-time estimates)
    name: str | None = None  # the job's name, when the trace says


@dataclass(frozen=True, slots=True)
class Trace:
    """Jobs sorted by submission; `quota_nodes[(tenant, flavor)]` = guaranteed nodes."""

    name: str
    jobs: tuple[TraceJob, ...]
    quota_nodes: dict[tuple[str, str], int] = field(default_factory=dict)
    gpus_per_node: int = GPUS_PER_NODE
    notes: tuple[str, ...] = ()
    jitter: tuple[int, float] | None = None  # (seed, spread in s) when arrivals were moved

    @property
    def tenants(self) -> list[str]:
        return sorted({j.tenant for j in self.jobs})

    def quota_gpus(self, tenant: str, flavor: str) -> int:
        return self.quota_nodes.get((tenant, flavor), 0) * self.gpus_per_node

    @property
    def total_nodes(self) -> int:
        return sum(self.quota_nodes.values())

    def limit(self, n: int | None) -> Trace:
        """The first `n` jobs (all when None)."""
        return self if n is None else replace(self, jobs=self.jobs[:n])

    def only(self, tenant: str) -> Trace:
        """This tenant's jobs alone, on a cluster of its quota."""
        jobs = tuple(j for j in self.jobs if j.tenant == tenant)
        quota = {k: v for k, v in self.quota_nodes.items() if k[0] == tenant}
        return replace(self, name=f"{self.name}:{tenant}", jobs=jobs, quota_nodes=quota)


def default_trace_dir() -> Path:
    """$GPUYARD_TRACE_DIR, else ../shared/traces next to the repository: the first
    `shared/traces` above this file (the compiled copy in build/compiled is deeper)."""
    env = os.environ.get(TRACE_DIR_ENV)
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    found = (p / "shared" / "traces" for p in here.parents if (p / "shared" / "traces").is_dir())
    return next(found, here.parents[3].parent / "shared" / "traces")


# ---- Philly 2017 ---------------------------------------------------------------------


def load_philly(trace_dir: Path, quotas: str = "helios") -> Trace:
    sizes = read_vc_nodes(trace_dir / PHILLY_VC_NODES)
    rows = list(_philly_rows(trace_dir / PHILLY_JOBS))
    kept = [r for r in rows if r[3] in sizes]
    dropped = len(rows) - len(kept)
    vcs = sorted({r[3] for r in rows} - set(sizes))
    jobs = _numbered(kept)
    note = (
        f"Philly 2017, Sia filter: {len(rows)} jobs; {dropped} of VCs without a Helios size "
        f"({', '.join(vcs) or 'none'}) dropped; {len(jobs)} kept"
    )
    trace = Trace("philly", jobs, notes=(note,))
    helios = {(vc, DEFAULT_FLAVOR): n for vc, n in sizes.items()}
    return with_quotas(trace, quotas, helios)


def _philly_rows(path: Path) -> Iterator[tuple[float, float, int, str]]:
    with gzip.open(path, "rt", newline="") as f:
        for row in csv.DictReader(f):
            duration, gpus = float(row["duration"]), int(row["num_gpus"])
            gpu_time = float(row["gpu_time"])
            if duration < MIN_DURATION_S or gpu_time >= MAX_GPU_TIME_S:
                continue
            t = datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            yield (t.timestamp(), duration, gpus, row["cluster"])


def read_vc_nodes(path: Path) -> dict[str, int]:
    with open(path, newline="") as f:
        return {row["vc"]: int(row["node num"]) for row in csv.DictReader(f)}


def _numbered(rows: Iterable[tuple], gpu_type: str | None = None) -> tuple[TraceJob, ...]:
    """Sort by submission (stable: file order breaks ties), start at 0, number the jobs."""
    ordered = sorted(rows, key=lambda r: r[0])
    if not ordered:
        return ()
    t0 = ordered[0][0]
    return tuple(
        TraceJob(
            f"j{i:06d}",
            r[0] - t0,
            r[1],
            r[2],
            r[3],
            (r[4] if len(r) > 4 and r[4] else None) or gpu_type or DEFAULT_FLAVOR,
            r[5] if len(r) > 5 and r[5] else None,
            r[6] if len(r) > 6 and r[6] else None,
        )
        for i, r in enumerate(ordered)
    )


# ---- generic CSV -----------------------------------------------------------------------


def load_csv(path: Path, quotas: str = "demand:0.7") -> Trace:
    """`submit_time, duration, num_gpus, tenant, gpu_type[, user, name]`; a header row is
    required; `user` and `name` are optional (None when absent or empty)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    rows = []
    with opener(path, "rt", newline="") as f:
        for n, row in enumerate(csv.DictReader(f), start=2):
            try:
                rows.append(
                    (
                        float(row["submit_time"]),
                        float(row["duration"]),
                        int(row["num_gpus"]),
                        row.get("tenant") or "default",
                        (row.get("gpu_type") or "").strip(),
                        (row.get("user") or "").strip(),
                        (row.get("name") or "").strip(),
                    )
                )
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{path}: line {n}: {e!r}; expected {CSV_COLUMNS}") from e
    trace = Trace(Path(path).name, _numbered(rows))
    return with_quotas(trace, quotas, None)


CSV_COLUMNS = "submit_time,duration,num_gpus,tenant,gpu_type[,user,name]"


# ---- one tenant, jittered arrivals -------------------------------------------------------


def one_tenant(trace: Trace, quotas: str, tenant: str = "all") -> Trace:
    """Every job in `tenant`; quotas computed on the merged trace (`demand:F` on the merged
    load: 35 nodes on Philly at 0.95), or the tenants' nodes added up per GPU type (helios)."""
    jobs = tuple(replace(j, tenant=tenant) for j in trace.jobs)
    merged = replace(trace, jobs=jobs, notes=(*trace.notes, f"every job in tenant {tenant!r}"))
    if quotas.startswith("demand:"):
        return with_quotas(merged, quotas, None)
    nodes: dict[tuple[str, str], int] = defaultdict(int)
    for (_, flavor), n in trace.quota_nodes.items():
        nodes[tenant, flavor] += n
    return replace(merged, quota_nodes=dict(sorted(nodes.items())))


def jittered(trace: Trace, seed: int, spread_s: float) -> Trace:
    """Each job's arrival moved later by a uniform offset in [0, spread_s), drawn from its own
    stream of `seed` (not the checkpoint phases'), in the trace's order; jobs re-sorted by
    the new times (stable), ids kept. `spread_s` 0: the trace itself."""
    if spread_s <= 0:
        return trace
    if trace.jitter is not None:
        raise ValueError(f"trace {trace.name} is jittered already {trace.jitter}")
    rng = random.Random(f"jitter:{seed}")
    moved = [replace(j, submit_s=j.submit_s + rng.uniform(0, spread_s)) for j in trace.jobs]
    moved.sort(key=lambda j: j.submit_s)
    return replace(trace, jobs=tuple(moved), jitter=(seed, spread_s))


# ---- quotas ------------------------------------------------------------------------------


def with_quotas(trace: Trace, quotas: str, helios: dict[tuple[str, str], int] | None) -> Trace:
    if quotas == "helios":
        if helios is None:
            raise ValueError("--quotas helios exists for the Philly trace only")
        return replace(trace, quota_nodes=helios)
    if quotas.startswith("demand:"):
        target = float(quotas.split(":", 1)[1])
        return replace(trace, quota_nodes=demand_quotas(trace, target))
    raise ValueError(f"unknown quotas {quotas!r}: helios or demand:F (e.g. demand:0.7)")


def demand_quotas(trace: Trace, target: float) -> dict[tuple[str, str], int]:
    """Each (tenant, GPU type) gets ceil(offered load / (target × GPUs per node)) nodes, at
    least enough for its biggest gang. Offered load = Σ gpus × duration / arrival span."""
    jobs = trace.jobs
    span = max(1.0, jobs[-1].submit_s - jobs[0].submit_s) if jobs else 1.0
    load: dict[tuple[str, str], float] = defaultdict(float)
    biggest: dict[tuple[str, str], int] = defaultdict(int)
    for j in jobs:
        key = (j.tenant, j.gpu_type)
        load[key] += j.gpus * j.duration_s / span
        biggest[key] = max(biggest[key], j.gpus)
    per = trace.gpus_per_node
    return {
        key: max(math.ceil(load[key] / (target * per)), math.ceil(biggest[key] / per))
        for key in sorted(load)
    }
