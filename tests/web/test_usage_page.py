"""The portal's Usage page over the real app (tests/api's world, after tests/api/test_usage.py's
two hours of use): its charts are inline SVG drawn by the server from the API's data, its
table is the API's report, and it shows a member their tenant only; the charts' geometry."""

from __future__ import annotations

import re

import pytest

from api.conftest import World, spec, world  # noqa: F401 - fixtures
from api.test_usage import used  # noqa: F401 - fixture
from gpuyard.api.schemas.usage import DayPoint, UsageSeries
from gpuyard.api.services.usagecharts import HEIGHT, lines, nice_top, stacked_bars


def page(w: World, who: str, path: str):
    headers = {"Cookie": f"gpuyard_session={w.tokens[who]}"}
    return w.client.get(path, headers=headers, follow_redirects=False)


def test_the_usage_page_draws_gpu_hours_and_waits_per_tenant(used):  # noqa: F811
    r = page(used, "root", "/usage")
    assert r.status_code == 200, r.text
    charts = re.findall(r'<svg class="chart"[^>]*aria-label="([^"]+)"', r.text)
    assert charts == ["GPU-hours per tenant per day", "average wait per tenant per day"]
    bars = re.findall(r"<title>(\w+) 1970-01-12: ([\d.]+) h</title>", r.text)
    assert sorted(bars) == [("blue", "1.0"), ("red", "4.0")]
    assert "<polyline" in r.text and "red 1970-01-12: 1800 s" in r.text
    assert re.search(r'href="/usage"\s+aria-current="page">Usage</a>', r.text)


def test_a_member_sees_their_tenant_only(used):  # noqa: F811
    r = page(used, "alice", "/usage?by=job")
    assert r.status_code == 200
    assert f'href="/jobs/{used.big}"' in r.text
    assert "blue" not in r.text and used.jobs["blue"] not in r.text


def test_a_bad_window_is_an_error_page_and_no_session_goes_to_login(used):  # noqa: F811
    r = page(used, "root", "/usage?since=yesterday")
    assert r.status_code == 422 and "Traceback" not in r.text
    r = used.client.get("/usage", follow_redirects=False)
    assert r.status_code in (302, 303) and "/login" in r.headers["location"]


def _series(tenant: str, *values: float) -> UsageSeries:
    days = [f"2026-11-{d:02d}" for d in range(1, len(values) + 1)]
    return UsageSeries(
        tenant=tenant, points=[DayPoint(day=d, value=v) for d, v in zip(days, values, strict=True)]
    )


def test_stacked_bars_stack_tenants_under_a_round_top():
    chart = stacked_bars([_series("a", 3, 1), _series("b", 4, 0)])
    assert nice_top(7) == 10 and [t.label for t in chart.ticks][-1] == "10"
    day1 = [b for b in chart.bars if "11-01" in b.title]
    assert [b.tenant for b in day1] == ["a", "b"]
    assert day1[0].height == pytest.approx(day1[1].height * 3 / 4)
    assert day1[1].y + day1[1].height == pytest.approx(day1[0].y)  # b sits on a
    assert all(b.y >= 0 and b.y + b.height <= HEIGHT for b in chart.bars)
    assert len(chart.bars) == 3  # a zero is not drawn


def test_lines_and_an_empty_chart():
    chart = lines([_series("a", 10, 20)])
    [line] = chart.lines
    assert len(line.points.split()) == 2 and line.dots[0][1] > line.dots[1][1]
    assert stacked_bars([]).empty and lines([]).empty


def test_the_usage_page_draws_the_queue_length(world):  # noqa: F811
    world.submit("amy", spec("red", "waits").replace("gpuNumber: 1", "gpuNumber: 3"))
    for _ in range(3):
        world.clock.advance(60)
        world.ctl.run_cycle()
    r = page(world, "alice", "/usage")
    assert 'aria-label="average queue length per tenant per day"' in r.text
    assert re.search(r"<title>red 1970-01-12: [0-9.e-]+</title></circle>", r.text)
