"""Job arrays and dependencies on the real server (`gpuyard up`, real containers): an array
of 20 with `%4` never has more than 4 children running and ends with 20 children recorded;
`after.ok` starts only after its job succeeded, and ends `DependencyNeverSatisfied` after a
failure. The `gpuyard` command shows the array as one row and its children."""

from __future__ import annotations

from datetime import datetime

import pytest

from e2e.test_job_control_e2e import cli

pytestmark = [pytest.mark.e2e, pytest.mark.container]

ARRAY = """name: sweep
array: "0-19%4"
taskRoles:
  main:
    cpuNumber: 0.1
    memoryMB: 64
    command: echo "index=$GPUYARD_ARRAY_INDEX parent=$GPUYARD_ARRAY_PARENT"; sleep 1
"""
JOB = "name: {name}\n{after}taskRoles:\n  main:\n    cpuNumber: 0.1\n    memoryMB: 64\n    command: {command}\n"


def at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, step in edges:  # an end at the same instant as a start counts first
        running += step
        peak = max(peak, running)
    return peak


def test_an_array_with_a_limit_and_dependencies_on_the_real_server(server):
    r = server.http.post(
        "/api/v1/jobs", content=ARRAY, headers={"Content-Type": "application/yaml"}
    )
    assert r.status_code == 201, r.text
    array_id, children = r.json()["id"], r.json()["children"]
    good = server.submit(JOB.format(name="good", after="", command="sleep 2"))
    bad = server.submit(JOB.format(name="bad", after="", command="sleep 1; exit 3"))
    after_good = server.submit(
        JOB.format(name="then", after=f"after: {{ok: [{good}]}}\n", command="'true'")
    )
    after_bad = server.submit(
        JOB.format(name="never", after=f"after: {{ok: [{bad}]}}\n", command="'true'")
    )

    waiting = server.job(after_good)
    assert waiting["state"] == "QUEUED" and waiting["after"] == {"ok": [good]}
    never = server.wait(after_bad, timeout=60)
    assert (never["state"], never["reason"]) == ("FAILED", "DependencyNeverSatisfied")
    assert not never["tasks"]  # it never ran
    then = server.wait(after_good, timeout=60)
    assert then["state"] == "SUCCEEDED"
    first = server.job(good)
    assert at(then["tasks"][0]["startedAt"]) >= at(first["tasks"][0]["finishedAt"])

    for child in children:
        server.wait(child, timeout=120)
    array = server.http.get(f"/api/v1/arrays/{array_id}").json()
    assert (array["state"], array["size"], array["counts"]) == ("SUCCEEDED", 20, {"SUCCEEDED": 20})
    assert [c["index"] for c in array["children"]] == list(range(20))
    tasks = [server.job(c)["tasks"][0] for c in children]
    assert most_at_once([(at(t["startedAt"]), at(t["finishedAt"])) for t in tasks]) <= 4
    assert f"index=7 parent={array_id}" in server.logs(children[7])

    shown = cli(server, server.token, "show", array_id)
    assert shown.returncode == 0, shown.stderr
    assert "job array" in shown.stdout and "20 SUCCEEDED" in shown.stdout
    listed = cli(server, server.token, "jobs", "--name", "sweep", "--limit", "50")
    assert listed.returncode == 0, listed.stderr
    assert array_id in listed.stdout and children[0] not in listed.stdout
    expanded = cli(server, server.token, "jobs", "--name", "sweep", "--limit", "50", "--expand")
    assert all(c in expanded.stdout for c in children)
