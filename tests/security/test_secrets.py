"""Secret values of a job spec (issue 15, item 7): env values marked `{secret: ...}` and
OpenPAI `secrets` are stored encrypted (the database holds no secret in clear; the key is
`<data dir>/secrets.key`, 0600), shown in clear only to the job's owner and admins (viewers
and other members of the tenant see `<redacted>`, in the API and in the portal), and handed
in clear to the task's launch only."""

from __future__ import annotations

import json
import os
import sqlite3
import stat

import pytest

from gpuyard.spec.openpai_script import HEADER
from gpuyard.store import open_store
from gpuyard.store.secrets import KEY_FILE, UNREADABLE, SecretBox

HF_TOKEN = "hf_s3cr3t-value-of-alice"
PAI_TOKEN = "pai-s3cr3t-of-alice"
REDACTED = "<redacted>"
# the OpenPAI role's command as converted: OpenPAI's errexit/pipefail header, then the command
PAI_COMMAND = "\n".join([*HEADER, f"python ps.py --token={PAI_TOKEN}"])


def ours() -> str:
    return json.dumps(
        {
            "name": "secret-env",
            "tenant": "red",
            "env": {"HF_TOKEN": {"secret": HF_TOKEN}, "LR": "0.1"},
            "taskRoles": {"main": {"gpuNumber": 1, "command": "python train.py"}},
        }
    )


def openpai() -> str:
    return json.dumps(
        {
            "protocolVersion": 2,
            "name": "pai-secret",
            "defaults": {"virtualCluster": "red"},
            "secrets": {"token": PAI_TOKEN},
            "taskRoles": {
                "ps": {
                    "resourcePerInstance": {"gpu": 1},
                    "commands": ["python ps.py --token=<% $secrets.token %>"],
                },
            },
        }
    )


@pytest.fixture(scope="module")
def jobs(shared_world) -> dict[str, str]:
    """alice's two jobs with secrets in tenant red."""
    out = {}
    for name, body in (("ours", ours()), ("openpai", openpai())):
        r = shared_world.call(
            "alice",
            "POST",
            "/api/v1/jobs",
            content=body,
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 201, r.text
        out[name] = r.json()["id"]
    return out


def spec_as(w, who: str, job_id: str) -> dict:
    r = w.call(who, "GET", f"/api/v1/jobs/{job_id}")
    assert r.status_code == 200, r.text
    return r.json()["spec"]


@pytest.mark.parametrize("who", ["vic", "amy"])  # red's viewer, another member of red
def test_viewers_and_other_members_see_secrets_redacted(shared_world, jobs, who):
    spec = spec_as(shared_world, who, jobs["ours"])
    assert spec["env"] == {"HF_TOKEN": {"secret": REDACTED}, "LR": "0.1"}  # plain env: shown
    pai = spec_as(shared_world, who, jobs["openpai"])
    assert pai["taskRoles"]["ps"]["command"] == {"secret": REDACTED}
    for job_id in jobs.values():
        text = shared_world.call(who, "GET", f"/api/v1/jobs/{job_id}").text
        assert HF_TOKEN not in text and PAI_TOKEN not in text


@pytest.mark.parametrize("who", ["alice", "redboss", "root"])  # owner, tenant admin, platform
def test_the_owner_and_admins_see_secrets(shared_world, jobs, who):
    assert spec_as(shared_world, who, jobs["ours"])["env"]["HF_TOKEN"] == {"secret": HF_TOKEN}
    command = spec_as(shared_world, who, jobs["openpai"])["taskRoles"]["ps"]["command"]
    assert command == {"secret": PAI_COMMAND}


@pytest.mark.parametrize("path", ["/jobs/{id}", "/submit?clone={id}"])
def test_the_portal_redacts_for_a_viewer(shared_world, jobs, path):
    for job_id in jobs.values():
        cookie = {"Cookie": f"gpuyard_session={shared_world.tokens['vic']}"}
        r = shared_world.client.get(path.format(id=job_id), headers=cookie)
        assert r.status_code == 200, r.text
        assert HF_TOKEN not in r.text and PAI_TOKEN not in r.text
        assert REDACTED in r.text.replace("&lt;", "<").replace("&gt;", ">")


def test_secrets_are_encrypted_at_rest(shared_world, jobs):
    data_dir = shared_world.store.engine.url.database.rsplit("/", 1)[0]
    key = os.path.join(data_dir, KEY_FILE)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    with sqlite3.connect(os.path.join(data_dir, "gpuyard.db")) as db:
        stored = [row[0] for row in db.execute("SELECT spec FROM jobs")]
    assert any('"sealed"' in s for s in stored)
    for raw in stored:
        assert HF_TOKEN not in raw and PAI_TOKEN not in raw
    for name in os.listdir(data_dir):  # nor in the WAL, nor anywhere else in the data dir
        with open(os.path.join(data_dir, name), "rb") as f:
            blob = f.read()
        assert HF_TOKEN.encode() not in blob and PAI_TOKEN.encode() not in blob, name


def test_the_task_is_launched_with_the_secrets_in_clear(shared_world, jobs):
    shared_world.ctl.run_cycle()
    launched = {launch.job_id: launch for launch in shared_world.engine.launched.values()}
    assert ("HF_TOKEN", HF_TOKEN) in launched[jobs["ours"]].env
    assert launched[jobs["openpai"]].command == PAI_COMMAND


def test_secrets_outlive_a_restart_and_need_the_key(tmp_path):
    store = open_store(tmp_path)
    sealed = store.secrets.seal({"env": {"T": {"secret": "v"}}})
    store.close()
    again = open_store(tmp_path)  # the same secrets.key
    assert again.secrets.unseal(sealed) == {"env": {"T": {"secret": "v"}}}
    again.close()
    (tmp_path / "elsewhere").mkdir()
    other = SecretBox.at(tmp_path / "elsewhere")  # another data dir: another key
    assert other.unseal(sealed) == {"env": {"T": {"secret": UNREADABLE}}}
