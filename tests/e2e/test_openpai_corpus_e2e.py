"""The OpenPAI corpus (tests/spec/openpai_corpus) on the real server and real containers.

Every config is submitted as its own YAML, unchanged, to one `gpuyard up`; the images it names
(Docker Hub's, a private registry's) are a small local busybox image imported under each of
those names, so nothing is pulled, and the named storage they mount is defined for the
tenant by its admin, as OpenPAI's storage configs are. Each config must get the outcome its header states: a 422
naming exactly its refused paths, or a job whose `SpecWarning` events name exactly its warned
paths (none for `ok`). Every accepted job must then be run by the platform: its tasks start
and end by their own commands (busybox has no `python`: exit codes are theirs), never by a
platform reason (an image, spec or agent error), or it waits for capacity this node lacks.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml

from busyboximage import BUSYBOX, busybox_tar, import_image
from e2e.conftest import TERMINAL
from spec.test_openpai_corpus import FILES, header

pytestmark = [pytest.mark.e2e, pytest.mark.container]
PLATFORM_REASONS = {"ImageError", "InvalidSpec", "AgentError", "PlatformError",
                    "RegistryUnavailable"}  # fmt: skip
WAITING_FOR_CAPACITY = {"NoMatchingGpuType", "ExceedsNodeCapacity"}  # never on this one node


def image_names() -> set[str]:
    """Every image the corpus names (dockerimage prerequisites' uris)."""
    names = set()
    for path in FILES:
        doc = yaml.safe_load(path.read_text())
        for p in doc.get("prerequisites") or []:
            if isinstance(p, dict) and p.get("type") == "dockerimage" and p.get("uri"):
                names.add(str(p["uri"]))
    return names


def import_as(server, base: Path, names: set[str]) -> None:
    applets = ("sh", "echo", "cat", "env", "ls", "sleep", "true", "false", "test")
    tar_path = busybox_tar(base, applets, {"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n"})
    for name in sorted(names):
        import_image(server, tar_path, name)


def storage_names() -> set[str]:
    """The named storage the corpus's teamwise_storage plugins name (a list of names)."""
    names = set()
    for path in FILES:
        doc = yaml.safe_load(path.read_text())
        extras = doc.get("extras") if isinstance(doc.get("extras"), dict) else {}
        for plugin in extras.get("com.microsoft.pai.runtimeplugin") or []:
            if not isinstance(plugin, dict) or plugin.get("plugin") != "teamwise_storage":
                continue
            params = plugin.get("parameters") if isinstance(plugin.get("parameters"), dict) else {}
            listed = params.get("storageConfigNames")
            if isinstance(listed, list):
                names |= {n for n in listed if isinstance(n, str) and n.isidentifier()}
    return names


def define_storage(server, names: set[str]) -> None:
    """Each name, a dir of the default tenant's, defined by the platform admin (as OpenPAI's
    storage configs are an admin's)."""
    uid = server.http.get("/api/v1/tenants/default").json()["uid"]
    for name in sorted(names):
        path = server.storage / "shared" / name
        path.mkdir(parents=True)
        os.chown(path, uid, uid)
        r = server.http.put(f"/api/v1/tenants/default/storage/{name}", json={"path": str(path)})
        assert r.status_code == 200, r.text


def make_virtual_clusters(server) -> None:
    """The tenants the corpus names as its `defaults.virtualCluster` (OpenPAI's word)."""
    names = set()
    for path in FILES:
        defaults = yaml.safe_load(path.read_text()).get("defaults")
        if isinstance(defaults, dict) and isinstance(defaults.get("virtualCluster"), str):
            names.add(defaults["virtualCluster"])
    for name in sorted(names - {"default"}):
        r = server.http.post("/api/v1/tenants", json={
            "name": name, "quotas": [{"flavor": "A100-80GB", "guaranteed": 1}],
        })  # fmt: skip
        assert r.status_code == 201, r.text


def submit(server, text: str):
    return server.http.post(
        "/api/v1/jobs", content=text, headers={"Content-Type": "application/yaml"}
    )


def warned_paths(job: dict) -> set[str]:
    return {
        re.split(r": ", e["message"], maxsplit=1)[0]
        for e in job["events"]
        if e["reason"] == "SpecWarning"
    }


def test_every_corpus_config_gets_its_outcome_and_runs(server, tmp_path):
    if not BUSYBOX.exists() or shutil.which("umoci") is None:
        pytest.skip("needs busybox-static and umoci (make system)")
    import_as(server, tmp_path, image_names())
    define_storage(server, storage_names())
    make_virtual_clusters(server)
    accepted: dict[str, str] = {}
    for path in FILES:
        wanted = header(path)
        r = submit(server, path.read_text())
        if wanted["expect"] == ["refused"]:
            assert r.status_code == 422, (path.name, r.text)
            assert {e["path"] for e in r.json()["errors"]} == set(wanted["path"]), path.name
            continue
        assert r.status_code == 201, (path.name, r.text)
        accepted[path.name] = r.json()["id"]
        job = server.job(accepted[path.name])
        assert warned_paths(job) == set(wanted["path"]), (path.name, job["events"])
    deadline = time.monotonic() + 240
    jobs = {}
    while time.monotonic() < deadline:
        jobs = {name: server.job(job_id) for name, job_id in accepted.items()}
        if all(j["state"] in TERMINAL or waits_for_capacity(j) for j in jobs.values()):
            break
        time.sleep(1)
    succeeded = [name for name, j in jobs.items() if j["state"] == "SUCCEEDED"]
    assert len(succeeded) >= len(jobs) // 2, {n: (j["state"], j["reason"]) for n, j in jobs.items()}
    for name, job in jobs.items():
        assert job["state"] in TERMINAL or waits_for_capacity(job), (name, job)
        if job["state"] in TERMINAL:
            reasons = {t["reason"] for t in job["tasks"]} | {job["reason"]}
            assert not reasons & PLATFORM_REASONS, (name, job["tasks"], job["events"])
            assert job["tasks"] and all(t["startedAt"] for t in job["tasks"]), (name, job)


def waits_for_capacity(job: dict) -> bool:
    """Queued for what this one node lacks (a GPU type, more GPUs), nothing else."""
    return (
        job["state"] == "QUEUED"
        and job["attempt"] <= 1
        and not job["tasks"]
        and (job["pendingCode"] in WAITING_FOR_CAPACITY)
    )
