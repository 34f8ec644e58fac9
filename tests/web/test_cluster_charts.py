"""The cluster page shows every node's GPUs with their last hour (issue 20): a small chart of
utilisation and memory per GPU from each node's own readings, the GPU's health and the node's
cordon state. The real app and controller on the fake engine with two nodes of real-looking
GPUs; the readings' clock is driven by hand, a minute at a time."""

from __future__ import annotations

import re
from dataclasses import replace

from fastapi.testclient import TestClient

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.api import create_app
from gpuyard.api.services.gpucharts import HEIGHT, WIDTH, gpu_chart
from gpuyard.controller import Controller
from gpuyard.controller.gpuhistory import GpuHistory, GpuPoint
from gpuyard.controller.gpureadings import GpuReadings
from gpuyard.model import CordonState, ManualClock
from gpuyard.runtime.gpustats import GpuSample
from gpuyard.runtime.nodereadings import NodeReadings
from gpuyard.store import PlatformRole, open_store


def real(node):
    return replace(node, gpus=tuple(replace(g, fake=False) for g in node.gpus))


def test_the_cluster_page_draws_every_nodes_gpus_last_hour(tmp_path):
    clock = ManualClock(1_000_000.0)
    store = open_store(tmp_path / "db", clock=clock)
    n1, n2 = real(make_node("n1", gpus=1)), real(make_node("n2", gpus=1))
    sick = replace(n2.gpus[0], healthy=False, health_cause="XID 79")
    engine = FakeEngine(n1, replace(n2, gpus=(sick,)))
    ctl = Controller(store, engine, clock)
    readings = GpuReadings(engine, now=clock.now)
    for minute in range(30):  # half an hour: n1 busier each minute, n2 idle
        for node, util in (("n1", 3.0 * minute), ("n2", 0.0)):
            g = engine.nodes()[0 if node == "n1" else 1].gpus[0]
            engine.readings_of[node] = NodeReadings(
                (GpuSample(0, g.uuid, "NVIDIA A100-SXM4-80GB", 0, util, 8192.0, 73728.0, 50, 80),)
            )
            readings.refresh()
        clock.advance(60)
    store.nodes.record(engine.nodes(), "fake")
    store.nodes.cordon("n2", CordonState.CORDONED, by="admin", reason="swap a GPU")
    store.users.create("root", PlatformRole.ADMIN)
    token = store.tokens.create("root", "t").secret
    with TestClient(create_app(ctl)) as client:
        client.app.state.gpu_readings = readings  # type: ignore[attr-defined]
        html = client.get("/cluster", headers={"Cookie": f"gpuyard_session={token}"}).text
    store.close()
    lines = re.findall(r'<polyline class="spark-util" points="([^"]+)"', html)
    assert len(lines) == 2, html  # one chart per GPU, both nodes
    busy = [tuple(map(float, p.split(","))) for p in lines[0].split()]
    assert len(busy) == 30 and busy[-1][1] < busy[0][1]  # rising utilisation: y goes up
    assert html.count('class="spark-mem"') == 2
    assert "utilisation mean 44%, max 87%, now 87%; memory in use now 10%" in html
    assert "XID 79" in html and ">unhealthy<" in html
    assert ">cordoned<" in html and "swap a GPU" in html


def test_a_chart_spans_the_hour_from_left_to_right():
    at = [(3600.0, GpuPoint(0, 100.0, None)), (0.0, GpuPoint(3600, 0.0, 50.0))]
    chart = gpu_chart(at)
    assert chart is not None
    (x0, y0), (x1, y1) = (tuple(map(float, p.split(","))) for p in chart.util.split())
    assert (x0, x1) == (0.0, WIDTH) and y0 < y1 and 0 < y0 < y1 < HEIGHT
    assert chart.memory == f"{WIDTH:.1f},{HEIGHT / 2:.1f}"
    assert gpu_chart([]) is None
    assert gpu_chart([(4000.0, GpuPoint(0, 1.0, None))]) is None  # older than the hour


def test_history_means_per_minute_and_forgets_after_an_hour():
    h = GpuHistory()
    for second, util in ((0, 10.0), (30, 30.0), (60, 50.0)):
        h.add("GPU-1", second, util, None)
    assert [(p.at, p.util_pct) for p in h.points("GPU-1", 60)] == [(0, 20.0), (60, 50.0)]
    h.forget_before(60 + 3600)
    assert h.points("GPU-1", 60 + 3600) == []
