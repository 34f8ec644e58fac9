"""Registry credentials (issue 18, item 4) never come back: a job's OpenPAI `auth` (its
password from the job's `secrets`) and a tenant's login set by a platform admin reach the
task's launch and nothing else. Every answer a viewer, another member, another tenant's member,
the owner and the admins can get (jobs list, job, original, events, OpenPAI config, tenant,
registries, portal pages) is searched for the passwords; only platform admins read or set a
tenant's registries, and then without the password. At rest both are sealed."""

from __future__ import annotations

import json
import os

import pytest

from gpuyard.model.registries import RegistryLogin

JOB_PASSWORD = "job-registry-Pa55-of-alice"
TENANT_PASSWORD = "tenant-registry-Pa55-of-red"
HOST = "registry.example.com"
WHO = ["vic", "amy", "bob", "alice", "redboss", "root"]  # viewer .. platform admin


def openpai(name: str, image: str, auth: bool) -> str:
    prerequisite = {"name": "img", "type": "dockerimage", "uri": image}
    if auth:
        prerequisite["auth"] = {"username": "alice", "password": "<% $secrets.regpw %>",
                                "registryuri": HOST}
    return json.dumps({
        "protocolVersion": 2, "name": name, "defaults": {"virtualCluster": "red"},
        "secrets": {"regpw": JOB_PASSWORD, "other": "not-a-registry-secret"} if auth else {},
        "prerequisites": [prerequisite],
        "taskRoles": {"main": {"dockerImage": "img", "commands": ["true"],
                               "resourcePerInstance": {"cpu": 1, "memoryMB": 256, "gpu": 0}}},
    })


@pytest.fixture(scope="module")
def jobs(shared_world) -> dict[str, str]:
    r = shared_world.call("root", "PUT", f"/api/v1/tenants/red/registries/{HOST}",
                          json={"username": "redbot", "password": TENANT_PASSWORD})
    assert r.status_code == 200, r.text
    out = {}
    for name, image, auth in (("with-auth", f"{HOST}/team/train:1", True),
                              ("tenant-login", f"{HOST}/team/eval:1", False),
                              ("elsewhere", "docker.io/library/busybox:1", False)):
        r = shared_world.call("alice", "POST", "/api/v1/jobs", content=openpai(name, image, auth),
                              headers={"Content-Type": "application/json"})
        assert r.status_code == 201, r.text
        out[name] = r.json()["id"]
    return out


def answers(w, who: str, jobs: dict[str, str]) -> list[tuple[str, str]]:
    """(path, text) of every read of the jobs, their tenant and its registries."""
    paths = ["/api/v1/jobs", "/api/v1/jobs?tenant=red", "/api/v1/tenants/red",
             "/api/v1/tenants/red/registries", "/rest-server/api/v2/jobs"]
    for job_id in jobs.values():
        paths += [f"/api/v1/jobs/{job_id}", f"/api/v1/jobs/{job_id}/original",
                  f"/api/v1/jobs/{job_id}/events"]
    paths += [f"/rest-server/api/v2/jobs/alice~{name}/config" for name in jobs]
    out = [(p, w.call(who, "GET", p).text) for p in paths]
    cookie = {"Cookie": f"gpuyard_session={w.tokens[who]}"}
    for job_id in jobs.values():
        for page in (f"/jobs/{job_id}", f"/submit?clone={job_id}"):
            out.append((page, w.client.get(page, headers=cookie).text))
    return out


@pytest.mark.parametrize("who", WHO)
def test_no_answer_holds_a_registry_password(shared_world, jobs, who):
    for path, text in answers(shared_world, who, jobs):
        assert JOB_PASSWORD not in text, (who, path)
        assert TENANT_PASSWORD not in text, (who, path)


def test_the_owner_sees_other_secrets_but_not_the_registry_password(shared_world, jobs):
    r = shared_world.call("alice", "GET", f"/api/v1/jobs/{jobs['with-auth']}/original")
    document = r.json()["document"]
    assert document["secrets"] == {"regpw": "<redacted>", "other": "not-a-registry-secret"}
    assert document["prerequisites"][0]["auth"]["password"] == "<redacted>"


@pytest.mark.parametrize("who", ["redboss", "alice", "vic", "bob"])
def test_only_platform_admins_read_or_set_a_tenants_registries(shared_world, jobs, who):
    assert shared_world.call(who, "GET", "/api/v1/tenants/red/registries").status_code == 403
    r = shared_world.call(who, "PUT", f"/api/v1/tenants/red/registries/{HOST}",
                          json={"username": "evil", "password": "x"})
    assert r.status_code == 403
    r = shared_world.call(who, "DELETE", f"/api/v1/tenants/red/registries/{HOST}")
    assert r.status_code == 403


def test_an_admin_lists_hosts_and_usernames_only(shared_world, jobs):
    r = shared_world.call("root", "GET", "/api/v1/tenants/red/registries")
    assert r.status_code == 200, r.text
    [entry] = r.json()["registries"]
    assert entry["registry"] == HOST and entry["username"] == "redbot"
    assert set(entry) == {"registry", "username", "updatedAt", "updatedBy"}
    bad = shared_world.call("root", "PUT", f"/api/v1/tenants/red/registries/{HOST}",
                            json={"password": "no-username-Pa55"})
    assert bad.status_code == 422 and "no-username-Pa55" not in bad.text
    missing = shared_world.call("root", "GET", "/api/v1/tenants/nope/registries")
    assert missing.status_code == 404


def test_each_task_is_launched_with_the_login_for_its_image(shared_world, jobs):
    shared_world.ctl.run_cycle()
    launched = {launch.job_id: launch for launch in shared_world.engine.launched.values()}
    assert launched[jobs["with-auth"]].image_login == RegistryLogin(HOST, "alice", JOB_PASSWORD)
    tenant_login = RegistryLogin(HOST, "redbot", TENANT_PASSWORD)
    assert launched[jobs["tenant-login"]].image_login == tenant_login
    assert launched[jobs["elsewhere"]].image_login is None  # docker.io: no login for it
    assert JOB_PASSWORD not in repr(launched[jobs["with-auth"]])


def test_registry_passwords_are_sealed_at_rest(shared_world, jobs):
    data_dir = shared_world.store.engine.url.database.rsplit("/", 1)[0]
    for name in os.listdir(data_dir):  # the database, its WAL, anything else there
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                blob = f.read()
            assert JOB_PASSWORD.encode() not in blob and TENANT_PASSWORD.encode() not in blob, name
