"""Fixtures for the container runtime tests: host set-up, one ContainerRuntime per OCI runtime.

Container tests need root and crun/runc; they are skipped otherwise. The host set-up that crun
needs on hybrid cgroup v1 hosts (a hugetlb v1 mount) is done once, idempotently.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuyard.runtime.cgroups import ensure_hugetlb_mount
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.types import TaskLaunch

from .helpers import WAIT_S, MakeLaunch, wait_exited

RUNTIMES = ("crun", "runc")


@pytest.fixture(scope="session")
def container_host() -> None:
    """Skip unless this host can run containers; mount hugetlb for crun when missing."""
    if os.geteuid() != 0:
        pytest.skip("container tests need root")
    if not any(shutil.which(n, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
               for n in RUNTIMES):
        pytest.skip("neither crun nor runc is installed")
    ensure_hugetlb_mount()


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest, container_host: None, tmp_path: Path
            ) -> Iterator[ContainerRuntime]:
    """A ContainerRuntime on crun, then on runc, with its state under the test's tmp dir."""
    rt = ContainerRuntime(tmp_path / "state", runtime=request.param)
    rt.images.pull_missing = False  # no registry in tests: a missing image fails at once
    yield rt
    leftover = rt.keys()
    for key in leftover:  # never leave a container behind
        rt.stop(key, 0)
        wait_exited(rt, key, WAIT_S)
    rt.close()  # its spare network namespaces, and its bridge and rules with no task left


@pytest.fixture
def make_launch(tmp_path: Path) -> MakeLaunch:
    """TaskLaunch with a unique key and /data, /output dirs under the test's tmp dir."""
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "output").mkdir(exist_ok=True)

    def make(command: str, **fields: Any) -> TaskLaunch:
        values: dict[str, Any] = {
            "key": f"t-{uuid.uuid4().hex[:12]}", "job_id": "job-1", "job_name": "demo",
            "role": "worker", "index": 0, "attempt": 1, "command": command, "cpu": 1.0,
            "memory_mb": 256, "data_dir": str(tmp_path / "data"),
            "output_dir": str(tmp_path / "output"), "storage_roots": (str(tmp_path),),
        }
        values.update(fields)
        return TaskLaunch(**values)

    return make
