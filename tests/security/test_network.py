"""A network of its own (issue 15, item 3): what a task can reach, and what it leaves behind.

Found: tasks shared the host's network: a task reached the API port, every 127.0.0.1 service
of the host, other tenants' task ports, 169.254.169.254 and the internet. Now each task has a
network namespace of its own on its node's bridge (runtime/tasknet.py), behind nftables rules
of gpuyard's own table. Real crun containers on a real node here (and the real server where it
matters); "the internet" and the metadata address are a namespace the test makes
(`networld.Outside`), never the real ones.

- The reachability matrix from a task of tenant A: the host (a listener on all its addresses:
  127.0.0.1, its own address, the bridge's gateway), a task of tenant B at its address and
  port, 169.254.169.254 and the internet: unreachable; a sibling of the same job: reachable.
  A task of a tenant allowed the internet reaches it, and still nothing else.
- No orphans: once tasks end and are removed, the node holds no namespace or rule of theirs;
  a closed node holds none at all; a lost supervisor's namespace goes with its recorded exit;
  what a crash left (an unrecorded namespace and lease, a claim whose task never came) is swept
  when the node starts again.
- The real server: a task of the default tenant cannot reach the API; `hostNetwork: true` is a
  422 until a platform admin grants the tenant `allowHostNetwork`, and then the task is in the
  node's network; after `kill -9` of the server mid-job and the job's end, no namespace of its
  task is left.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from e2e.conftest import Server
from gpuyard.model import TaskReason
from gpuyard.runtime import netclaims, nftrules
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.tasknet import NetConfig, node_tag
from gpuyard.runtime.types import TaskLaunch, TaskPeer
from runtime.conftest import container_host  # noqa: F401 - fixture
from runtime.helpers import wait_exited, wait_for, wait_running
from security.networld import (
    INTERNET,
    METADATA,
    OUTSIDE_PORT,
    HostListener,
    Outside,
    free_port,
    host_address,
    listen_command,
    probe_command,
    probe_result,
)

pytestmark = pytest.mark.container
PORT = 20000  # every task listens on the same port: each has its own address


@pytest.fixture
def node(container_host: None, tmp_path: Path) -> Iterator[ContainerRuntime]:  # noqa: F811
    rt = ContainerRuntime(tmp_path / "state", runtime="crun")
    yield rt
    close_node(rt)


def close_node(rt: ContainerRuntime) -> None:
    """Stop and remove what a test left, then close the node (its network goes with it)."""
    leftover = rt.keys()
    for key in leftover:
        rt.stop(key, 0)
        wait_exited(rt, key)
        rt.remove(key)
    rt.close()


@pytest.fixture
def outside() -> Iterator[Outside]:
    out = Outside()
    yield out
    out.close()


@pytest.fixture
def host_listener() -> Iterator[HostListener]:
    listener = HostListener(free_port())
    yield listener
    listener.close()


def launch(tmp_path: Path, job: str, index: int, command: str, **fields: object) -> TaskLaunch:
    (tmp_path / "output").mkdir(exist_ok=True)
    values: dict[str, object] = {
        "key": f"{job}-{index}-{uuid.uuid4().hex[:6]}", "job_id": job, "job_name": job,
        "role": "worker", "index": index, "attempt": 1, "command": command, "cpu": 0.5,
        "memory_mb": 256, "output_dir": str(tmp_path / "output"),
        "storage_roots": (str(tmp_path),),
    }
    values.update(fields)
    return TaskLaunch(**values)  # type: ignore[arg-type]


def job(node: ContainerRuntime, tmp_path: Path, name: str, commands: list[str],
        **fields: object) -> list[TaskLaunch]:
    """A job's tasks, told each other's addresses as the controller tells them: claimed on
    the node first. Not started."""
    keys = [f"{name}-{i}-{uuid.uuid4().hex[:6]}" for i in range(len(commands))]
    addresses = node.claim_addresses(keys)
    peers = tuple(TaskPeer("worker", i, "n", addresses[k]) for i, k in enumerate(keys))
    return [launch(tmp_path, name, i, c, key=keys[i], peers=peers, **fields)
            for i, c in enumerate(commands)]


def started(node: ContainerRuntime, tasks: list[TaskLaunch]) -> list[TaskLaunch]:
    for task in tasks:
        node.start(task)
    return tasks


def listener(tmp_path: Path, name: str) -> str:
    return listen_command(PORT, name, f"/output/{name}.ready")


def ready(tmp_path: Path, name: str) -> None:
    wait_for(f"{name} to listen", (tmp_path / "output" / f"{name}.ready").exists)


def run_probe(node: ContainerRuntime, task: TaskLaunch) -> dict[str, str]:
    exit_ = wait_exited(node, task.key, 30)
    assert exit_.reason == TaskReason.COMPLETED, exit_.message
    return probe_result(node.read_log(task.key).decode())


def reached(result: dict[str, str]) -> dict[str, bool]:
    """Target → whether the probe read the banner of what it wanted to reach."""
    wanted = {"sibling": "sibling", "tenant_b": "tenant-b", "internet": "outside",
              "metadata": "outside"}
    return {name: value == wanted.get(name, "host") for name, value in result.items()}


def host_targets(node: ContainerRuntime, port: int) -> dict[str, tuple[str, int]]:
    gateway = node.network.config.subnet.replace(".0/", ".1/").split("/")[0]
    return {"host_loopback": ("127.0.0.1", port), "host_address": (host_address(), port),
            "host_gateway": (gateway, port), "metadata": (METADATA, OUTSIDE_PORT),
            "internet": (INTERNET, OUTSIDE_PORT)}


def test_a_task_reaches_its_sibling_and_nothing_else(
    node: ContainerRuntime, tmp_path: Path, outside: Outside, host_listener: HostListener
) -> None:
    (b,) = started(node, job(node, tmp_path, "tenant-b", [listener(tmp_path, "tenant-b")]))
    targets = {**host_targets(node, host_listener.port), "tenant_b": (b.peers[0].address, PORT)}
    # tenant A's job: rank 0 listens, rank 1 probes (told rank 0's address, as a peer is)
    sibling, probe = job(node, tmp_path, "tenant-a", [listener(tmp_path, "sibling"), "true"])
    targets["sibling"] = (sibling.peers[0].address, PORT)
    probe = replace(probe, command=probe_command(targets))
    started(node, [sibling])
    ready(tmp_path, "tenant-b")
    ready(tmp_path, "sibling")
    result = run_probe(node, started(node, [probe])[0])
    assert reached(result) == {
        "sibling": True, "tenant_b": False, "host_loopback": False, "host_address": False,
        "host_gateway": False, "metadata": False, "internet": False,
    }, result
    assert host_listener.came == 0


def test_a_task_reaches_itself_on_its_loopback_and_its_address(
    node: ContainerRuntime, tmp_path: Path
) -> None:
    """What every server in a task needs (a DDP rank's store connects to its own address)."""
    (task,) = job(node, tmp_path, "self", ["true"])
    me = task.peers[0].address
    targets = {"loopback": ("127.0.0.1", PORT), "address": (me, PORT)}
    ready_file = "/output/self.ready"
    command = (f"{listen_command(PORT, 'self', ready_file)} & "
               f"while [ ! -e {ready_file} ]; do sleep 0.05; done; {probe_command(targets)}")
    result = run_probe(node, started(node, [replace(task, command=command)])[0])
    assert result == {"loopback": "self", "address": "self"}, result


def test_a_dead_nodes_tables_on_the_same_subnet_do_not_cut_a_new_nodes_tasks_off(
    node: ContainerRuntime, tmp_path: Path
) -> None:
    """Tables left by a node that is gone (its bridge too) still drop bridged packets of their
    subnet; a node given that subnet later removes them when it sets its network up."""
    tag = f"dead{secrets.token_hex(2)}"
    config = node.network.config
    nftrules.run(nftrules.node_rules(f"gpuyard_{tag}", f"gpy-{tag}", config.subnet, config.pool))
    try:
        sibling, probe = job(node, tmp_path, "after", [listener(tmp_path, "sibling"), "true"])
        targets = {"sibling": (sibling.peers[0].address, PORT)}
        started(node, [sibling])
        ready(tmp_path, "sibling")
        result = run_probe(node, started(node, [replace(probe, command=probe_command(targets))])[0])
        assert result == {"sibling": "sibling"}, result
        assert not nftrules.tables_present(f"gpuyard_{tag}")
    finally:
        nftrules.run(nftrules.drop_tables(f"gpuyard_{tag}"))


def test_a_tenant_allowed_the_internet_reaches_it_and_still_not_the_host(
    node: ContainerRuntime, tmp_path: Path, outside: Outside, host_listener: HostListener
) -> None:
    targets = host_targets(node, host_listener.port)
    (task,) = started(node, job(node, tmp_path, "tenant-c", [probe_command(targets)],
                                allow_internet=True))
    result = run_probe(node, task)
    assert reached(result) == {
        "internet": True, "metadata": False, "host_loopback": False, "host_address": False,
        "host_gateway": False,
    }, result
    assert host_listener.came == 0


def nft_elements(table: str, family: str, name: str) -> list[object]:
    out = subprocess.run(["nft", "-j", "list", "set", family, table, name],
                         capture_output=True, text=True, check=True).stdout
    sets = [item["set"] for item in json.loads(out)["nftables"] if "set" in item]
    return sets[0].get("elem", [])


def netns_of(node: ContainerRuntime) -> set[str]:
    """The node's namespaces under /run/netns (its prefix names them)."""
    if not os.path.isdir("/run/netns"):
        return set()
    return {n for n in os.listdir("/run/netns") if n.startswith(node.network.prefix)}


def spares(node: ContainerRuntime) -> set[str]:
    return {str((netclaims.read_record(p) or {}).get("netns")) for p in node.network.pool.records()}


def test_ended_and_removed_tasks_leave_no_namespace_or_rule(
    node: ContainerRuntime, tmp_path: Path
) -> None:
    tasks = started(node, job(node, tmp_path, "done", ["sleep 5", "sleep 5", "sleep 5"],
                              allow_internet=True))
    for task in tasks:  # all three, before any ends (a loaded machine starts them slowly)
        wait_running(node, task.key)
    assert len(nft_elements(node.network.table, "inet", "pairs")) == 6  # 3 tasks, both ways
    for task in tasks:
        assert wait_exited(node, task.key).reason == TaskReason.COMPLETED
        node.remove(task.key)
    assert netns_of(node) == spares(node)  # the spare pool only, claimed by nobody
    assert not list(node.network.claims.iterdir())
    for family in ("inet", "bridge"):
        assert nft_elements(node.network.table, family, "pairs") == []
    assert nft_elements(node.network.table, "inet", "internet") == []
    node.close()
    assert netns_of(node) == set()
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True,
                            check=True).stdout
    assert node.network.table not in tables
    assert not Path(f"/sys/class/net/{node.network.bridge}").exists()


def test_tables_flushed_under_running_tasks_come_back_with_their_elements(
    node: ContainerRuntime, tmp_path: Path
) -> None:
    """`nft flush ruleset` (a firewall reload) would leave running tasks unfenced: the node
    notices (every 30 s) and when it starts again, and applies its rules and the tasks'
    elements anew."""
    tasks = started(node, job(node, tmp_path, "fenced", ["sleep 30", "sleep 30"]))
    wait_running(node, tasks[1].key)
    table = node.network.table
    assert not node.network.check_rules()  # nothing to do while the tables are there
    drop = ["nft", "delete", "table"]
    for family in ("inet", "bridge"):
        subprocess.run([*drop, family, table], check=True)
    assert node.network.check_rules()
    assert len(nft_elements(table, "inet", "pairs")) == 2
    assert len(nft_elements(table, "bridge", "pairs")) == 2
    for family in ("inet", "bridge"):
        subprocess.run([*drop, family, table], check=True)
    again = ContainerRuntime(node.state_root, runtime="crun")  # the node starts again
    assert len(nft_elements(table, "inet", "pairs")) == 2
    again.close()  # tasks still hold their namespaces: the tables stay
    assert len(nft_elements(table, "inet", "pairs")) == 2


def test_a_lost_supervisors_namespace_goes_with_its_recorded_exit(
    node: ContainerRuntime, tmp_path: Path
) -> None:
    (task,) = started(node, job(node, tmp_path, "lost", ["sleep 30"]))
    wait_running(node, task.key)
    claimed = netclaims.read_record(node.network.claims / f"{task.key}.json")
    assert claimed is not None and claimed["netns"] in netns_of(node)
    pid, _ = node.task_dir(task.key).supervisor()  # type: ignore[misc]
    os.kill(pid, 9)  # the supervisor dies; its container stays until the node notices
    wait_for("the lost supervisor", lambda: not Path(f"/proc/{pid}").exists())
    assert wait_exited(node, task.key).reason == TaskReason.AGENT_ERROR
    assert claimed["netns"] not in netns_of(node)
    assert not (node.network.claims / f"{task.key}.json").exists()


def test_what_a_crash_left_is_swept_when_the_node_starts(
    container_host: None, tmp_path: Path  # noqa: F811
) -> None:
    first = ContainerRuntime(tmp_path / "state", runtime="crun")
    first.network.ensure()
    unrecorded = netclaims.make_netns(first.network.prefix, first.network.cni)  # then a crash
    never_came = first.network.claims / "never-came.json"
    first.network.claim(["never-came"])
    os.utime(never_came, (1, 1))  # claimed long ago for a task that never reached the node
    assert {unrecorded["netns"]} <= netns_of(first)
    second = ContainerRuntime(tmp_path / "state", runtime="crun")  # the node starts again
    try:
        assert unrecorded["netns"] not in netns_of(second)
        assert not never_came.exists()
        leases = second.network.ipam / second.network.cni["name"]
        holders = {p.read_text().split()[0] for p in leases.iterdir() if p.name[0].isdigit()}
        assert unrecorded["netns"] not in holders
    finally:
        first.network.pool.close()
        second.close()
    assert netns_of(second) == set()
    assert node_tag(tmp_path / "state") in second.network.table


def job_spec(name: str, command: str, **fields: object) -> str:
    """A one-task job (JSON, which is YAML too)."""
    role = {"cpuNumber": 0.2, "memoryMB": 128, "command": command}
    return json.dumps({"name": name, **fields, "taskRoles": {"main": role}})


@pytest.mark.e2e
def test_the_api_is_out_of_reach_and_the_host_network_a_permission(make_server) -> None:
    srv = make_server("--host", "0.0.0.0")  # on every address of the host, its own included
    targets = {"loopback": ("127.0.0.1", srv.port), "address": (host_address(), srv.port)}
    job_id = srv.submit(job_spec("probe", probe_command(targets)))
    assert srv.wait(job_id)["state"] == "SUCCEEDED"
    result = probe_result(srv.logs(job_id))
    assert not any(v.startswith("HTTP/") for v in result.values()), result
    host = job_spec("probe-host", probe_command(targets), hostNetwork=True)
    r = srv.http.post("/api/v1/jobs", content=host, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    (error,) = r.json()["errors"]
    assert error["path"] == "hostNetwork" and "--allow-host-network" in error["message"]
    r = srv.http.patch("/api/v1/tenants/default", json={"allowHostNetwork": True})
    assert r.status_code == 200 and r.json()["allowHostNetwork"] is True, r.text
    job_id = srv.submit(host)
    assert srv.wait(job_id)["state"] == "SUCCEEDED"
    assert probe_result(srv.logs(job_id))["loopback"] == "HTTP/1.1 200 OK"


@pytest.mark.e2e
def test_a_kill9_of_the_server_leaves_no_namespace_once_the_task_is_released(
    make_server, tmp_path: Path
) -> None:
    first = make_server()
    prefix = f"gpy-{node_tag(first.data_dir / 'node')}-"
    job_id = first.submit(job_spec("slow", "sleep 3"))
    first.wait(job_id, {"RUNNING"})
    net = first.data_dir / "node" / "net"
    (claim,) = list((net / "claims").iterdir())
    held = json.loads(claim.read_text())["netns"]
    first.kill9()
    second = Server(first.data_dir, tmp_path / "second.log")
    second.start()
    try:
        assert second.wait(job_id)["state"] == "SUCCEEDED"
        wait_for("the task's release", lambda: not list((net / "claims").iterdir()), 30)
        left = {n for n in os.listdir("/run/netns") if n.startswith(prefix)}
        spare = {json.loads(p.read_text())["netns"] for p in (net / "pool").iterdir()
                 if p.suffix == ".json"}
        assert held not in left and left <= spare
    finally:
        second.stop()
    assert not {n for n in os.listdir("/run/netns") if n.startswith(prefix)}


@pytest.fixture
def two_nodes(container_host: None, tmp_path: Path, task_subnets: tuple[str, str]  # noqa: F811
              ) -> Iterator[tuple[ContainerRuntime, ContainerRuntime]]:
    """Two nodes of one cluster on this machine (as the Ray tests run them): a /24 each of the
    test's task network, told of each other as the Ray engine tells its agents."""
    network = task_subnets[1]
    base = network.split(".0.0/")[0]
    nodes = []
    for i in range(2):
        config = NetConfig.of(f"{base}.{i}.0/24", network)
        nodes.append(ContainerRuntime(tmp_path / f"node-{i}", runtime="crun", network=config))
    members = [(n.network.config.subnet, f"127.0.0.{i + 2}") for i, n in enumerate(nodes)]
    for n in nodes:
        n.set_cluster(members)
    yield nodes[0], nodes[1]
    for n in nodes:
        close_node(n)


def test_a_jobs_tasks_on_two_nodes_reach_each_other_and_no_other_job(
    two_nodes: tuple[ContainerRuntime, ContainerRuntime], tmp_path: Path
) -> None:
    one, two = two_nodes
    (other,) = started(two, job(two, tmp_path, "other", [listener(tmp_path, "other")]))
    keys = {one: f"a-0-{uuid.uuid4().hex[:6]}", two: f"a-1-{uuid.uuid4().hex[:6]}"}
    addresses = {n: n.claim_addresses([k])[k] for n, k in keys.items()}
    peers = tuple(TaskPeer("worker", i, f"n{i}", addresses[n]) for i, n in enumerate(keys))
    targets = {"sibling": (addresses[one], PORT), "tenant_b": (other.peers[0].address, PORT)}
    sibling = launch(tmp_path, "a", 0, listener(tmp_path, "sibling"), key=keys[one], peers=peers)
    probe = launch(tmp_path, "a", 1, probe_command(targets), key=keys[two], peers=peers)
    one.start(sibling)
    ready(tmp_path, "sibling")
    ready(tmp_path, "other")
    two.start(probe)
    result = run_probe(two, probe)
    assert reached(result) == {"sibling": True, "tenant_b": False}, result
