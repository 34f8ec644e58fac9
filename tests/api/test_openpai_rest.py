"""OpenPAI's REST v2 job API (`/rest-server/api/v2/jobs`) on the real app: submit YAML, list,
get by `user~name`, stop, the original config, task logs, who may do what, and every error in
OpenPAI's shape (`{"code", "message"}`), never a 500.

The world is tests/api/conftest.py's: tenants red and blue; alice and amy members of red, vic its
viewer, redboss its tenant admin, bob a member of blue, root the platform admin.
"""

from __future__ import annotations

import pytest
import yaml

from gpuyard.model import JobState
from gpuyard.runtime.types import TaskExit, TaskPhase, TaskStatus

API = "/rest-server/api/v2/jobs"
SECRET = "hf-token-of-alice"


def protocol(name: str = "pai", tenant: str = "red", instances: int = 2, **extra) -> dict:
    doc = {
        "protocolVersion": 2,
        "name": name,
        "type": "job",
        "defaults": {"virtualCluster": tenant},
        "taskRoles": {
            "train": {
                "instances": instances,
                "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0},
                "commands": ["python train.py --epochs <% $parameters.epochs %>"],
            }
        },
        "parameters": {"epochs": 3},
    }
    return doc | extra


def submit(world, who: str, doc: dict | str):
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False)
    return world.call(who, "POST", API, content=text, headers={"Content-Type": "text/yaml"})


def submitted(world, who: str, doc: dict) -> str:
    r = submit(world, who, doc)
    assert r.status_code == 202, r.text
    return r.json()["jobId"]


def assert_pai_error(r, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"], body
    assert "Traceback" not in r.text
    return body


def tasks_of(world, job_id: str) -> list[str]:
    return world.engine.keys_on(job_id)


# ---- submit ------------------------------------------------------------------------------


def test_a_yaml_protocol_is_submitted_as_openpai_answers(world):
    r = submit(world, "alice", protocol())
    assert r.status_code == 202, r.text
    assert r.json()["message"] == "Update job pai for user alice successfully."
    assert r.headers["Location"] == f"{API}/alice~pai"
    job = world.store.jobs.get(r.json()["jobId"])
    assert (job.owner, job.name, job.tenant) == ("alice", "pai", "red")
    assert job.spec["taskRoles"]["train"]["taskNumber"] == 2
    assert job.original["name"] == "pai"  # the document kept beside the converted spec


def test_a_second_live_job_of_a_name_is_a_conflict_until_the_first_ends(world):
    first = submitted(world, "alice", protocol())
    assert_pai_error(submit(world, "alice", protocol()), 409, "ConflictJobError")
    assert submit(world, "amy", protocol()).status_code == 202  # names are per user
    world.store.jobs.request_stop(first, "Cancelled")
    world.ctl.run_cycle()
    world.ctl.run_cycle()
    assert world.store.jobs.get(first).state == JobState.STOPPED
    second = submitted(world, "alice", protocol())  # the name is free again
    r = world.call("alice", "GET", f"{API}/alice~pai")
    assert r.json()["debugId"] == second  # user~name is the newest job of that name


def test_a_viewer_may_not_submit_and_a_stranger_may_not_submit_to_the_tenant(world):
    assert_pai_error(submit(world, "vic", protocol()), 403, "ForbiddenUserError")
    assert_pai_error(submit(world, "bob", protocol()), 403, "ForbiddenUserError")


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        (protocol(jobRetryCount="two"), "jobRetryCount"),
        (
            protocol(taskRoles={"train": {"resourcePerInstance": {"gpu": -1}, "commands": ["x"]}}),
            "taskRoles.train.resourcePerInstance.gpu",
        ),
        (protocol(tenant="nowhere"), "defaults.virtualCluster"),
        ({"name": "ours", "taskRoles": {"m": {"command": "true"}}}, "protocolVersion"),
        ("protocolVersion: 2\nname: [unclosed\n", ""),
        ("", ""),
    ],
)
def test_a_bad_protocol_is_a_400_naming_the_field(world, doc, path):
    body = assert_pai_error(submit(world, "alice", doc), 400, "InvalidProtocolError")
    assert path in [e["path"] for e in body["errors"]], body
    if path:
        assert f"{path}: " in body["message"]
    assert world.store.jobs.list(owners=["alice"], name="pai") == []


def test_a_body_too_large_is_refused_in_openpai_shape(world):
    r = submit(world, "alice", "x" * ((1 << 20) + 1))
    assert_pai_error(r, 413, "InvalidProtocolError")


# ---- list ----------------------------------------------------------------------------------


def test_the_list_has_openpai_fields_newest_first(world):
    job = submitted(world, "alice", protocol())
    r = world.call("alice", "GET", API)
    assert r.status_code == 200, r.text
    items = r.json()
    assert [i["debugId"] for i in items] == [job, world.jobs["red"]]  # not blue's job
    first = items[0]
    assert first["name"] == "pai" and first["username"] == "alice"
    assert first["state"] == "WAITING" and first["executionType"] == "START"
    assert first["virtualCluster"] == "red"
    assert (first["totalTaskNumber"], first["totalTaskRoleNumber"]) == (2, 1)
    assert first["createdTime"] == 1_000_000_000  # milliseconds (the clock is at 1e6 s)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?username=alice", ["pai", "red-job"]),
        ("?username=amy", ["amy-job"]),
        ("?username=amy,alice", ["amy-job", "pai", "red-job"]),
        ("?username=bob", []),  # bob's jobs are in blue: not the caller's tenant
        ("?vc=blue", []),
        ("?vc=red&state=WAITING", ["amy-job", "pai", "red-job"]),
        ("?state=RUNNING", []),
        ("?state=SUCCEEDED,FAILED", []),
        ("?limit=1", ["amy-job"]),
        ("?offset=1&limit=1", ["pai"]),
        ("?offset=3", []),
        ("?username=&vc=&state=", []),  # as OpenPAI: an empty name matches no job
    ],
)
def test_the_list_filters_as_openpai(world, query, expected):
    submitted(world, "alice", protocol())
    submitted(world, "amy", protocol(name="amy-job"))
    r = world.call("alice", "GET", API + query)
    assert r.status_code == 200, r.text
    assert [i["name"] for i in r.json()] == expected


def test_a_platform_admin_lists_every_tenant(shared_world):
    names = {i["name"] for i in shared_world.call("root", "GET", API).json()}
    assert {"red-job", "blue-job"} <= names


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("?state=PAUSED", "InvalidParametersError"),
        ("?limit=0", "InvalidParametersError"),
        ("?limit=50001", "InvalidParametersError"),
        ("?offset=-1", "InvalidParametersError"),
        ("?limit=ten", "InvalidParametersError"),
        ("?keyword=pai", "InvalidParametersError"),
        ("?withTotalCount=true", "InvalidParametersError"),
        ("?order=state,DESC", "InvalidParametersError"),
    ],
)
def test_a_list_filter_gpuyard_cannot_apply_is_refused_not_ignored(shared_world, query, code):
    assert_pai_error(shared_world.call("alice", "GET", API + query), 400, code)


# ---- get -----------------------------------------------------------------------------------


def test_a_job_is_shown_in_openpai_shape_through_its_life(world):
    job = submitted(world, "alice", protocol())
    detail = world.call("alice", "GET", f"{API}/alice~pai").json()
    assert detail["name"] == "pai" and detail["frameworkName"] == "alice~pai"
    assert detail["jobStatus"]["state"] == "WAITING"
    assert detail["jobStatus"]["username"] == "alice"
    assert detail["jobStatus"]["virtualCluster"] == "red"
    statuses = detail["taskRoles"]["train"]["taskStatuses"]
    assert [(t["taskIndex"], t["taskState"]) for t in statuses] == [(0, "WAITING"), (1, "WAITING")]
    world.ctl.run_cycle()
    keys = tasks_of(world, job)
    for key in keys:
        world.engine.run(key)
    world.ctl.run_cycle()
    detail = world.call("alice", "GET", f"{API}/alice~pai").json()
    assert detail["jobStatus"]["state"] == "RUNNING"
    assert detail["jobStatus"]["appLaunchedTime"] is not None
    statuses = detail["taskRoles"]["train"]["taskStatuses"]
    assert [t["taskState"] for t in statuses] == ["RUNNING", "RUNNING"]
    assert statuses[0]["containerNodeName"] == "n1"
    world.engine.exit(keys[0], 0, "Completed")
    world.engine.exit(keys[1], 3, "Error(exit 3)")
    world.ctl.run_cycle()
    detail = world.call("alice", "GET", f"{API}/alice~pai").json()
    assert detail["jobStatus"]["state"] == "FAILED"
    assert detail["jobStatus"]["appExitCode"] == 3
    assert detail["jobStatus"]["completedTime"] is not None
    by_index = {t["taskIndex"]: t for t in detail["taskRoles"]["train"]["taskStatuses"]}
    assert by_index[1]["taskState"] == "FAILED" and by_index[1]["containerExitCode"] == 3


def test_a_succeeded_job_has_exit_code_0(world):
    job = submitted(world, "alice", protocol(instances=1))
    world.ctl.run_cycle()
    (key,) = tasks_of(world, job)
    world.engine.run(key)
    world.engine.exit(key, 0, "Completed")
    world.ctl.run_cycle()
    status = world.call("alice", "GET", f"{API}/alice~pai").json()["jobStatus"]
    assert (status["state"], status["appExitCode"]) == ("SUCCEEDED", 0)


@pytest.mark.parametrize(("who", "shown"), [("alice", True), ("redboss", True), ("vic", False)])
def test_exit_diagnostics_hold_log_lines_and_only_log_readers_get_them(world, who, shown):
    job = submitted(world, "alice", protocol(instances=1))
    world.ctl.run_cycle()
    (key,) = tasks_of(world, job)
    world.engine.run(key)
    message = "exit 3\n--- last lines of the log ---\nSECRET=hunter2"
    world.engine.status_of[key] = TaskStatus(
        key, TaskPhase.EXITED, 0.0, TaskExit(3, "Error(exit 3)", 1.0, message)
    )
    world.ctl.run_cycle()
    r = world.call(who, "GET", f"{API}/alice~pai")
    assert r.status_code == 200, r.text
    (task,) = r.json()["taskRoles"]["train"]["taskStatuses"]
    assert task["containerExitCode"] == 3 and task["containerExitType"] == "Error(exit 3)"
    assert ("hunter2" in r.text) is shown
    assert (task["containerExitDiagnostics"] == message) is shown


@pytest.mark.parametrize("who", ["alice", "amy", "vic", "redboss", "root"])
def test_everyone_of_the_tenant_sees_the_job(shared_world, who):
    r = shared_world.call(who, "GET", f"{API}/alice~red-job")
    assert r.status_code == 200, r.text
    assert r.json()["debugId"] == shared_world.jobs["red"]


@pytest.mark.parametrize(
    "path",
    ["/alice~red-job", "/alice~red-job/config", "/alice~red-job/executionType"],
)
def test_another_tenants_member_gets_no_job_as_if_none_existed(shared_world, path):
    method = "PUT" if path.endswith("executionType") else "GET"
    kwargs = {"json": {"value": "STOP"}} if method == "PUT" else {}
    r = shared_world.call("bob", method, API + path, **kwargs)
    body = assert_pai_error(r, 404, "NoJobError")
    assert body["message"] == "Job alice~red-job is not found."
    missing = shared_world.call("alice", method, API + path.replace("red-job", "nope"), **kwargs)
    assert missing.json()["message"] == "Job alice~nope is not found."


@pytest.mark.parametrize("who", ["anonymous", "badtoken"])
def test_without_a_valid_token_every_endpoint_is_401(shared_world, who):
    for method, path in [("GET", API), ("POST", API), ("GET", f"{API}/alice~red-job")]:
        r = shared_world.call(who, method, path)
        assert_pai_error(r, 401, "UnauthorizedUserError")
        assert r.headers["WWW-Authenticate"].startswith("Bearer")


# ---- stop ----------------------------------------------------------------------------------


def test_stop_stops_the_job(world):
    job = submitted(world, "alice", protocol())
    world.ctl.run_cycle()
    r = world.call("alice", "PUT", f"{API}/alice~pai/executionType", json={"value": "STOP"})
    assert r.status_code == 202, r.text
    status = world.call("alice", "GET", f"{API}/alice~pai").json()["jobStatus"]
    assert (status["state"], status["executionType"]) == ("STOPPING", "STOP")
    world.ctl.run_cycle()  # the controller tells the engine to stop the tasks
    assert sorted(world.engine.stopped) == sorted(tasks_of(world, job))
    for key in tasks_of(world, job):
        world.engine.exit(key, 143, "Cancelled")
    world.ctl.run_cycle()
    assert world.store.jobs.get(job).state == JobState.STOPPED
    status = world.call("alice", "GET", f"{API}/alice~pai").json()["jobStatus"]
    assert (status["state"], status["executionType"]) == ("STOPPED", "STOP")
    again = world.call("alice", "PUT", f"{API}/alice~pai/executionType", json={"value": "STOP"})
    assert again.status_code == 202  # a STOP of an ended job is accepted, as OpenPAI does


@pytest.mark.parametrize(("who", "status"), [("amy", 403), ("vic", 403), ("redboss", 202)])
def test_only_the_owner_and_admins_stop_a_job(world, who, status):
    r = world.call(who, "PUT", f"{API}/alice~red-job/executionType", json={"value": "STOP"})
    assert r.status_code == status, r.text
    if status == 403:
        assert r.json()["code"] == "ForbiddenUserError"
        assert world.store.jobs.get(world.jobs["red"]).stop_requested is None


@pytest.mark.parametrize(
    "body",
    [{"value": "START"}, {"value": "PAUSE"}, {"valu": "STOP"}, {"value": 1}, [], None],
)
def test_a_bad_execution_type_is_a_400(world, body):
    r = world.call("alice", "PUT", f"{API}/alice~red-job/executionType", json=body)
    assert_pai_error(r, 400, "InvalidParametersError")
    assert world.store.jobs.get(world.jobs["red"]).stop_requested is None


# ---- config --------------------------------------------------------------------------------


def test_the_config_is_the_document_as_submitted(world):
    doc = protocol(secrets={"hf": SECRET})
    doc["taskRoles"]["train"]["commands"] = ["echo <% $secrets.hf %>", "python train.py"]
    submitted(world, "alice", doc)
    r = world.call("alice", "GET", f"{API}/alice~pai/config")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/yaml")
    assert yaml.safe_load(r.text) == doc  # parameters not substituted, secrets as written
    assert list(yaml.safe_load(r.text)) == list(doc)  # in the order submitted


@pytest.mark.parametrize("who", ["vic", "amy"])
def test_the_config_hides_secrets_from_who_may_not_read_them(world, who):
    submitted(world, "alice", protocol(secrets={"hf": SECRET}))
    r = world.call(who, "GET", f"{API}/alice~pai/config")
    assert r.status_code == 200, r.text
    assert yaml.safe_load(r.text)["secrets"] == {"hf": "<redacted>"}
    assert SECRET not in r.text


def test_a_job_in_gpuyards_format_has_no_openpai_config(shared_world):
    r = shared_world.call("alice", "GET", f"{API}/alice~red-job/config")
    body = assert_pai_error(r, 404, "NoJobConfigError")
    assert f"/api/v1/jobs/{shared_world.jobs['red']}/original" in body["message"]


# ---- logs ----------------------------------------------------------------------------------


def logs_path(framework: str, role: str = "main", index: int = 0, attempt: int = 0) -> str:
    return (
        f"{API}/{framework}/attempts/{attempt}/taskRoles/{role}/taskIndex/{index}/attempts/0/logs"
    )


def test_a_tasks_log_is_reached_through_its_location(shared_world):
    r = shared_world.call("alice", "GET", logs_path("alice~red-job"))
    assert r.status_code == 200, r.text
    (location,) = r.json()["locations"]
    assert location["name"] == "all"
    log = shared_world.call("alice", "GET", location["uri"])  # the same token
    assert log.status_code == 200 and log.text == "epoch 1\nepoch 2\n"
    tail = shared_world.call("alice", "GET", logs_path("alice~red-job") + "?tail-mode=true")
    assert "tail=" in tail.json()["locations"][0]["uri"]


@pytest.mark.parametrize(("who", "status"), [("vic", 403), ("amy", 403), ("bob", 404)])
def test_logs_are_refused_as_the_native_api_refuses_them(shared_world, who, status):
    r = shared_world.call(who, "GET", logs_path("alice~red-job"))
    assert_pai_error(r, status, "ForbiddenUserError" if status == 403 else "NoJobError")


@pytest.mark.parametrize(
    "path",
    [
        logs_path("alice~red-job", index=1),
        logs_path("alice~red-job", role="other"),
        logs_path("alice~red-job", attempt=1),
        logs_path("alice~red-job").replace("attempts/0/logs", "attempts/1/logs"),
    ],
)
def test_a_task_that_did_not_run_has_no_log(shared_world, path):
    assert_pai_error(shared_world.call("alice", "GET", path), 404, "NoTaskLogError")


def test_a_queued_job_has_no_log_yet(world):
    submitted(world, "alice", protocol())
    r = world.call("alice", "GET", logs_path("alice~pai", role="train"))
    assert_pai_error(r, 404, "NoTaskLogError")


# ---- never a 500 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("GET", f"{API}/red-job", {}),
        ("GET", f"{API}/~", {}),
        ("GET", f"{API}/alice~", {}),
        ("GET", f"{API}/~red-job", {}),
        ("GET", f"{API}/alice~red~job", {}),
        (
            "GET",
            f"{API}/alice~red-job/attempts/99999999999/taskRoles/main/taskIndex/0/attempts/0/logs",
            {},
        ),
        ("GET", f"{API}/alice~red-job/attempts/0/taskRoles/9bad/taskIndex/0/attempts/0/logs", {}),
        ("GET", f"{API}/alice~red-job/attempts/-1/taskRoles/main/taskIndex/0/attempts/0/logs", {}),
        ("PUT", f"{API}/alice~red-job/executionType", {"content": b"\xff\xfe"}),
        ("PUT", f"{API}/alice~red-job/executionType", {"content": b"{not json"}),
        ("PUT", f"{API}/alice~red-job/executionType", {"content": b"1" * 5000}),
        ("POST", API, {"content": b"\xff\xfe\x00"}),
        ("POST", API, {"content": b"[1, 2]"}),
        ("POST", API, {"content": b"protocolVersion: 2\n" + b"- " * 400}),
    ],
)
def test_odd_requests_answer_4xx_in_openpai_shape(shared_world, method, path, kwargs):
    r = shared_world.call("alice", method, path, **kwargs)
    assert 400 <= r.status_code < 500, r.text
    body = r.json()
    assert set(body) >= {"code", "message"}, body


# ---- the OpenPAI Python SDK, as recorded --------------------------------------------------


def test_the_python_sdks_calls_work_as_it_sends_them(world):
    """openpaisdk (microsoft/pai contrib/python-sdk, not installable here: not on the package
    index this machine reaches) submits with `requests.request('POST', pai_uri +
    '/rest-server/api/v2/jobs', headers={'Authorization': 'Bearer T', 'Content-Type':
    'text/yaml'}, data=yaml.dump(job))` and accepts 201 or 202; its other calls send
    `json=body` (`{}` for a GET) and read `["jobStatus"]["state"]` among WAITING, RUNNING,
    SUCCEEDED and FAILED. The same calls, byte for byte, on the OpenPAI v2 paths."""
    token = world.tokens["alice"]
    job = protocol(name="sdk-job")
    r = world.client.request(
        "POST", API, content=yaml.dump(job),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "text/yaml"},
    )  # fmt: skip
    assert r.status_code in (201, 202), r.text
    as_json = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    got = world.client.request("GET", f"{API}/alice~sdk-job", headers=as_json, content=b"{}")
    assert got.status_code == 200, got.text
    assert got.json()["jobStatus"]["state"] in ("WAITING", "RUNNING", "SUCCEEDED", "FAILED")
    config = world.client.request("GET", f"{API}/alice~sdk-job/config", headers=as_json)
    assert yaml.load(config.text, Loader=yaml.FullLoader) == job  # the SDK's YAML fallback
    listed = world.client.request("GET", API, headers=as_json, content=b"{}")
    assert "sdk-job" in [j["name"] for j in listed.json()]
    stop = world.client.request(
        "PUT", f"{API}/alice~sdk-job/executionType", headers=as_json, json={"value": "STOP"}
    )
    assert stop.status_code in (200, 202), stop.text
    assert stop.json()["message"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", f"{API}/alice~red-job/ssh", 404),
        ("GET", "/rest-server/api/v2/info", 404),
        ("GET", "/rest-server/api/v1/user/alice/jobs", 404),
        ("DELETE", f"{API}/alice~red-job", 405),
        ("PATCH", API, 405),
    ],
)
def test_what_gpuyard_does_not_serve_answers_in_openpai_shape(shared_world, method, path, status):
    r = shared_world.call("alice", method, path)
    assert_pai_error(r, status, "NoApiError")
    if status == 405:
        assert "GET" in r.headers["Allow"]


def test_the_native_api_keeps_its_own_error_shape(shared_world):
    r = shared_world.call("alice", "DELETE", f"/api/v1/jobs/{shared_world.jobs['red']}")
    assert r.status_code == 405 and "detail" in r.json()
    assert "detail" in shared_world.call("alice", "GET", "/api/v1/nope").json()


def test_a_huge_offset_is_a_400_not_a_database_error(shared_world):
    r = shared_world.call("alice", "GET", f"{API}?offset={10**30}")
    assert_pai_error(r, 400, "InvalidParametersError")
