"""deploy/: the Grafana dashboard and the alert rules use only metrics gpuyard exports (the
syntax of the rules and scrape config is promtool's to check: `make lint`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from gpuyard.metrics.dcgm import FIELDS
from metrics.conftest import scrape

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
METRIC = re.compile(r"\b(gpuyard_[a-z_]+|DCGM_FI_[A-Z_]+)")
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def exported(client) -> set[str]:
    """Every family /metrics declares (empty ones too), with their sample suffixes."""
    text = client.get("/metrics").text
    names = {f.name for f in text_string_to_metric_families(text)} | {f.name for f in FIELDS}
    names |= {name for name, _ in scrape(client)}
    return names | {base(n) for n in names}


def base(name: str) -> str:
    return next((name[: -len(s)] for s in SUFFIXES if name.endswith(s)), name)


def used(exprs: list[str]) -> set[str]:
    return {m for e in exprs for m in METRIC.findall(e)}


def dashboard_exprs() -> list[str]:
    doc = json.loads((DEPLOY / "grafana" / "gpuyard.json").read_text())
    assert doc["uid"] and doc["panels"]
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])] + [
        v["definition"] for v in doc["templating"]["list"] if v["type"] == "query"
    ]


def alert_exprs() -> list[str]:
    doc = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def test_dashboard_and_alerts_use_exported_metrics(rig, client):
    job = rig.submit("blue", gpus=1)
    rig.start(job)
    names = exported(client)
    missing = sorted(m for m in used(dashboard_exprs() + alert_exprs()) if base(m) not in names)
    assert missing == []


def test_the_alerts_the_issue_asks_for():
    names = {
        r["alert"]
        for g in yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
        for r in g["rules"]
    }
    assert {
        "GpuyardNodeDown",
        "GpuyardGpuAllocatedButIdle",
        "GpuyardJobFailureRate",
        "GpuyardQueueingDelayTooLong",
        "GpuyardTenantOverGpuHourBudget",
    } <= names
