"""A job's tasks across nodes: ranks, master address and port, peer lists, reserved ports."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builders import make_node
from fake_engine import FakeEngine
from gpuyard.controller import Controller
from gpuyard.model import JobState, ManualClock
from gpuyard.runtime.env import distributed_env
from gpuyard.spec import parse_job_spec
from gpuyard.store import NewJob, Store

PORTS = (21000, 21049)


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(
        replace(make_node("n1", gpus=2), address="10.0.0.1"),
        replace(make_node("n2", gpus=2), address="10.0.0.2"),
    )


def controller(store: Store, engine: FakeEngine, clock: ManualClock) -> Controller:
    return Controller(store, engine, clock, stop_grace_s=5, port_range=PORTS)


def submit(store: Store, roles: dict) -> str:
    spec = parse_job_spec({"name": "ddp", "taskRoles": roles})
    job = NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count, spec.to_document())
    return store.jobs.submit(job).id


def envs(engine: FakeEngine, job_id: str) -> dict[str, dict[str, str]]:
    """`role-index` → the distributed env its launch gets."""
    out = {}
    for key in engine.keys_on(job_id):
        launch = engine.launched[key]
        out[f"{launch.role}-{launch.index}"] = distributed_env(launch)
    return out


def test_two_roles_across_two_nodes_get_ranks_master_and_peers(store, engine, clock):
    ctl = controller(store, engine, clock)
    jid = submit(
        store,
        {
            "master": {"gpuNumber": 2, "command": "train", "ports": {"http": 1}},
            "worker": {"taskNumber": 2, "gpuNumber": 1, "command": "train"},
        },
    )
    ctl.run_cycle()
    env = envs(engine, jid)
    assert set(env) == {"master-0", "worker-0", "worker-1"}
    nodes = {k: engine.node_of[k] for k in engine.keys_on(jid)}
    assert len(set(nodes.values())) == 2  # 4 GPUs asked, 2 a node: the job spans both
    m = env["master-0"]
    master_ip = m["PAI_HOST_IP_master_0"]
    assert {e["MASTER_ADDR"] for e in env.values()} == {master_ip}
    assert {e["MASTER_PORT"] for e in env.values()} == {m["PAI_PORT_LIST_master_0_master"]}
    assert [env[k]["RANK"] for k in ("master-0", "worker-0", "worker-1")] == ["0", "1", "2"]
    assert {e["WORLD_SIZE"] for e in env.values()} == {"3"}
    # the two workers share a node (the master has the other one to itself)
    assert sorted(env[k]["LOCAL_RANK"] for k in ("worker-0", "worker-1")) == ["0", "1"]
    assert m["LOCAL_RANK"] == "0" and m["LOCAL_WORLD_SIZE"] == "1"
    assert env["worker-0"]["PAI_HOST_IP_worker_1"] == env["worker-1"]["PAI_CURRENT_CONTAINER_IP"]
    # each task at the address its node holds for it (its own network namespace), not the node's
    own = {engine.launched[k].role + "-" + str(engine.launched[k].index): engine.addresses[k]
           for k in engine.keys_on(jid)}
    assert {k: e["PAI_CURRENT_CONTAINER_IP"] for k, e in env.items()} == own
    assert len(set(own.values())) == 3 and not set(own.values()) & {"10.0.0.1", "10.0.0.2"}
    # declared ports: one http port per master task; master port only for rank 0
    assert "PAI_PORT_LIST_master_0_http" in m
    assert not any(k.startswith("PAI_PORT_LIST_worker") for k in m)


def test_ports_are_never_shared_on_a_node_and_come_back_when_tasks_end(store, engine, clock):
    ctl = controller(store, engine, clock)
    roles = {"w": {"taskNumber": 2, "command": "x", "ports": {"p": 2}}}
    first, second = submit(store, roles), submit(store, roles)
    ctl.run_cycle()
    held = [(n, p) for n in ("n1", "n2") for p in store.nodes.held_ports(n)]
    assert len(held) == 10  # 2 jobs × 2 tasks × 2 ports, and a master port for each rank 0
    for node in ("n1", "n2"):
        ports = store.nodes.held_ports(node)
        assert all(PORTS[0] <= p <= PORTS[1] for p in ports)
    for key in engine.keys_on(first):
        engine.run(key)
        engine.exit(key, 0, "Completed")
    ctl.run_cycle()
    ctl.run_cycle()
    assert store.jobs.get(first).state == JobState.SUCCEEDED
    still = {t for n in ("n1", "n2") for t in store.nodes.held_ports(n).values()}
    assert still == {t.id for t in store.jobs.tasks(second)}


def test_reserved_ports_survive_a_controller_restart(store, engine, clock):
    roles = {"w": {"taskNumber": 4, "command": "x", "ports": {"p": 2}}}
    first = submit(store, roles)
    controller(store, engine, clock).run_cycle()
    before = {n: store.nodes.held_ports(n) for n in ("n1", "n2")}
    restarted = controller(store, engine, clock)  # a new process: only the store remains
    second = submit(store, roles)
    restarted.run_cycle()
    mine = {t.id for t in store.jobs.tasks(second)}
    for node, ports in before.items():
        after = store.nodes.held_ports(node)
        assert {p: after[p] for p in ports} == ports  # the first job keeps its ports
        assert not mine & set(ports.values())
    assert engine.keys_on(second) and engine.keys_on(first)


def test_a_node_out_of_ports_fails_the_start_as_a_platform_error(store, engine, clock):
    ctl = Controller(store, engine, clock, port_range=(21000, 21001))
    jid = submit(store, {"w": {"command": "x", "ports": {"p": 3}}})
    ctl.run_cycle()
    (task,) = store.jobs.tasks(jid)
    assert task.reason == "AgentError" and "no 3 free port(s)" in (task.message or "")
    assert engine.keys_on(jid) == []
    ctl.run_cycle()
    job = store.jobs.get(jid)
    assert job.attempt == 2 and job.retries_used == 0  # retried, not counted


def test_a_host_network_job_is_at_its_nodes_addresses_and_claims_none(store, engine, clock):
    ctl = controller(store, engine, clock)
    spec = parse_job_spec({"name": "ib", "hostNetwork": True,
                           "taskRoles": {"w": {"taskNumber": 2, "gpuNumber": 2, "command": "x"}}})
    jid = store.jobs.submit(NewJob(spec.name, spec.tenant, spec.priority, spec.retry_count,
                                   spec.to_document())).id
    ctl.run_cycle()
    launches = [engine.launched[k] for k in engine.keys_on(jid)]
    assert {la.network for la in launches} == {"host"} and not engine.addresses
    assert {distributed_env(la)["PAI_CURRENT_CONTAINER_IP"] for la in launches} == {
        "10.0.0.1", "10.0.0.2"}


def test_a_node_that_cannot_hold_addresses_fails_the_start_as_the_platforms(store, engine, clock):
    def broken(node, keys):
        raise OSError("no CNI plugins")

    engine.claim_addresses = broken  # type: ignore[method-assign]
    ctl = controller(store, engine, clock)
    jid = submit(store, {"w": {"taskNumber": 2, "command": "x"}})
    ctl.run_cycle()
    assert not engine.keys_on(jid)
    tasks = store.jobs.tasks(jid)
    assert {t.reason for t in tasks} == {"AgentError"}
    assert all("network addresses: no CNI plugins" in (t.message or "") for t in tasks)
