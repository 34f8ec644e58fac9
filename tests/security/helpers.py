"""Helpers of the security tests: run a hostile process, read a server's metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

HOSTILE = Path(__file__).parent / "hostile.py"
NOBODY = 65534  # the uid tasks ran as before per-tenant ids


def run_hostile(*args: str, timeout: float = 120) -> dict:
    """Run `hostile.py ARGS` to its end; what it printed."""
    out = subprocess.run(
        [sys.executable, str(HOSTILE), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    return json.loads(out.stdout)


def make_tenant(server, name: str, root: Path) -> int:
    """A tenant with one guaranteed A100 and the storage root `root`; its uid."""
    r = server.http.post("/api/v1/tenants", json={
        "name": name, "quotas": [{"flavor": "A100-80GB", "guaranteed": 1}],
        "storageRoots": [str(root)],
    })
    assert r.status_code == 201, r.text
    return r.json()["uid"]


def metric(server, name: str, **labels: str) -> float:
    """The sum of the samples `name{labels}` on the server's /metrics (as its admin)."""
    r = server.http.get("/metrics")
    assert r.status_code == 200, r.text
    return sum(
        s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )
