"""A real store, controller and API on the fake engine, cycle by cycle, for the metrics tests;
plus the fake NVML of tests/gpus for the DCGM readings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from builders import make_node
from fake_engine import FakeEngine
from gpus.conftest import fake_nvml_dir, with_fake_nvml, without_nvml  # noqa: F401 - fixtures
from gpuyard.api import create_app
from gpuyard.controller import Controller
from gpuyard.model import FlavorQuota, GpuDevice, ManualClock, Tenant
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store, open_store

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Rig:
    store: Store
    engine: FakeEngine
    clock: ManualClock
    ctl: Controller
    util: dict[str, float | None] = field(default_factory=dict)  # GPU uuid → % (injected)

    def submit(self, tenant: str = "red", gpus: int = 1, **extra) -> str:
        doc = {
            "name": "t",
            "tenant": tenant,
            "taskRoles": {"worker": {"gpuNumber": gpus, "command": "true"}},
            **extra,
        }
        spec = parse_job_spec(doc)
        job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
        return self.store.jobs.submit(job).id

    def start(self, job_id: str) -> list[str]:
        """Schedule (if needed) and run every task of the job; return their keys."""
        self.ctl.run_cycle()
        keys = self.engine.keys_on(job_id)
        self.engine.now = self.clock.now()
        for key in keys:
            self.engine.run(key)
        self.ctl.run_cycle()
        return keys

    def reader(self, gpu: GpuDevice) -> float | None:
        """Like the server's NVML reader: nothing for a fake GPU."""
        return None if gpu.fake else self.util.get(gpu.uuid)


def make_rig(
    tmp_path: Path, tenants: list[Tenant], *, real_gpus: bool = False, **controller_args
) -> Rig:
    """`real_gpus`: n1's GPUs are not fake (as if NVML found them), so readings count."""
    clock = ManualClock(1_000_000.0)
    store = open_store(tmp_path / "db", clock=clock)
    for t in tenants:
        store.tenants.create(t)
    node = make_node("n1", gpus=4)
    if real_gpus:
        node = replace(node, gpus=tuple(replace(g, fake=False) for g in node.gpus))
    engine = FakeEngine(node, now=clock.now())
    rig = Rig(store, engine, clock, None)  # type: ignore[arg-type]
    rig.ctl = Controller(
        store, engine, clock, stop_grace_s=5, gpu_utilization=rig.reader, **controller_args
    )
    return rig


TENANTS = [
    Tenant("red", (FlavorQuota("A100-80GB", 1),)),
    Tenant("blue", (FlavorQuota("A100-80GB", 3),), gpu_hour_budget=100.0),
]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = make_rig(tmp_path, TENANTS)
    yield r
    r.ctl.webhooks.stop()
    r.store.close()


SCRAPE_TOKEN = "test-scrape-token"


@contextmanager
def scraper(ctl: Controller) -> Iterator[TestClient]:
    """A client of the app that sends its scrape token (as Prometheus would)."""
    with TestClient(create_app(ctl)) as c:
        c.app.state.metrics_token = SCRAPE_TOKEN  # type: ignore[attr-defined]
        c.headers["Authorization"] = f"Bearer {SCRAPE_TOKEN}"
        yield c


@pytest.fixture
def client(rig: Rig) -> Iterator[TestClient]:
    with scraper(rig.ctl) as c:
        yield c


def scrape(client: TestClient, **headers: str) -> Samples:
    r = client.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return parse(r.text)


def parse(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels`."""
    found = [
        v
        for (n, ls), v in samples.items()
        if n == name and all(dict(ls).get(k) == w for k, w in labels.items())
    ]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]
