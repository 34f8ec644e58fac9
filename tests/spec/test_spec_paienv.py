"""OpenPAI's task variables: job and role level from the spec, host lists and ports per task."""

from __future__ import annotations

from gpuyard.runtime.env import build_env
from gpuyard.runtime.types import TaskLaunch, TaskPeer
from gpuyard.spec import parse_job_spec
from gpuyard.spec.paienv import job_env

PAI = {
    "protocolVersion": 2,
    "name": "ps-demo",
    "defaults": {"virtualCluster": "vision"},
    "taskRoles": {
        "ps_server": {
            "instances": 2,
            "resourcePerInstance": {"cpu": 2, "memoryMB": 8192, "gpu": 0},
            "completion": {"minFailedInstances": None},
            "commands": ["python ps.py"],
        },
        "worker": {
            "instances": 3,
            "resourcePerInstance": {"cpu": 0.5, "memoryMB": 32, "gpu": 1, "ports": {"grpc": 2}},
            "completion": {"minSucceededInstances": 1, "minFailedInstances": 2},
            "commands": ["python worker.py"],
        },
    },
}

PEERS = (
    TaskPeer("ps_server", 0, "n1", "10.0.0.1", (("http", (20001,)), ("ssh", (20002,)))),
    TaskPeer("ps_server", 1, "n2", "10.0.0.2", (("http", (20005,)), ("ssh", (20006,)))),
    TaskPeer("worker", 0, "n1", "10.0.0.3", (("grpc", (20010, 20011)), ("http", (20012,)))),
)


def env_of(role: str, index: int) -> dict[str, str]:
    spec = parse_job_spec(PAI)
    launch = TaskLaunch(
        key="k", job_id="j", job_name="ps-demo", role=role, index=index, attempt=1,
        command="true", cpu=1, memory_mb=64, peers=PEERS,
        job_env=tuple(job_env(spec, "alice").items()),
    )  # fmt: skip
    return dict(entry.split("=", 1) for entry in build_env(launch))


def test_job_and_role_variables_as_openpai_writes_them():
    env = job_env(parse_job_spec(PAI), "alice")
    assert env["PAI_USER_NAME"] == env["PAI_USERNAME"] == "alice"
    assert env["PAI_VIRTUAL_CLUSTER"] == "vision"
    assert env["PAI_RESOURCE_ps_server"] == "0,2,8192,8192"  # gpu,cpu,memoryMB,shmMB
    assert env["PAI_RESOURCE_worker"] == "1,0.5,32,64"  # /dev/shm is never under 64 MB
    assert env["PAI_MIN_FAILED_TASK_COUNT_ps_server"] == "-1"  # null: never by count
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_ps_server"] == "2"  # every task: the count
    assert env["PAI_MIN_FAILED_TASK_COUNT_worker"] == "2"
    assert env["PAI_MIN_SUCCEEDED_TASK_COUNT_worker"] == "1"
    assert (env["PAI_TASKS_NUM"], env["PAI_JOB_TASK_ROLE_LIST"]) == ("5", "ps_server,worker")


def test_host_lists_name_each_tasks_address_and_http_port():
    env = env_of("worker", 0)
    assert env["PAI_TASK_ROLE_ps_server_HOST_LIST"] == "10.0.0.1:20001,10.0.0.2:20005"
    assert env["PAI_TASK_ROLE_worker_HOST_LIST"] == "10.0.0.3:20012"
    assert env["PAI_TASK_ROLE_INSTANCES"] == "ps_server:0,ps_server:1,worker:0"


def test_the_tasks_own_ports():
    env = env_of("worker", 0)
    assert env["PAI_CONTAINER_HOST_grpc_PORT_LIST"] == "20010,20011"
    assert env["PAI_CONTAINER_HOST_PORT_LIST"] == "grpc:20010,20011;http:20012;"
    assert env["PAI_CONTAINER_HOST_PORT"] == env["PAI_CURRENT_CONTAINER_PORT"] == "20012"
    assert env["PAI_CONTAINER_HOST_IP"] == "10.0.0.3"
    assert "PAI_CONTAINER_SSH_PORT" not in env
    assert env_of("ps_server", 1)["PAI_CONTAINER_SSH_PORT"] == "20006"
    assert env["PAI_worker_0_grpc_PORT"] == "20010,20011"


def test_work_dir_and_user_name_are_set():
    env = env_of("ps_server", 0)
    assert env["PAI_WORK_DIR"] == "/workspace"
    assert env["PAI_USER_NAME"] == "alice"


def test_converted_openpai_roles_reserve_ssh_and_http_ports():
    spec = parse_job_spec(PAI)
    assert dict(spec.task_roles["worker"].ports) == {"grpc": 2, "http": 1, "ssh": 1}
    assert dict(spec.task_roles["ps_server"].ports) == {"http": 1, "ssh": 1}
