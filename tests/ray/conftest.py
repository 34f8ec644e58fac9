"""Ray acceptance fixtures: a real 3-node Ray cluster on this machine (tests/raycluster.py) and
the real server on it (`gpuyard up --engine ray://<head>`); each node keeps its tasks under
`<data dir>/nodes/<node name>`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.conftest import Server
from gpuyard.runtime.rootfs import HOST_PATHS_ENV
from raycluster import RayCluster


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """One cluster for the module (starting one takes 15-35 s here); a test that loses a node
    comes last."""
    began = time.monotonic()
    # the training job runs this venv's python, whose interpreter lives outside the host's
    # system dirs (pyenv, under /root): each node shows it to tasks read-only, as a node's
    # admin would; its nodes take the setting when they start, no other test sees it
    with pytest.MonkeyPatch.context() as env:
        env.setenv(HOST_PATHS_ENV, sys.base_prefix)
        cluster = RayCluster(tmp_path_factory.mktemp("ray") / "data")
    print(f"3-node Ray cluster up in {time.monotonic() - began:.1f}s")
    yield cluster
    cluster.shutdown()


@pytest.fixture
def ray_server(ray_cluster: RayCluster, tmp_path: Path) -> Iterator[Server]:
    """The server on the cluster, on the module's data dir (its storage root: the dir above)."""
    log = tmp_path / "server.log"
    srv = Server(ray_cluster.data_dir, log, "--engine", ray_cluster.engine,
                 "--task-network", ray_cluster.task_network)
    try:
        srv.start()
        # the job runs this venv's python, under /root: tasks run as root (few capabilities)
        # and may read this checkout (the venv and the training script) as their dataDir
        roots = [str(ray_cluster.data_dir.parent), str(Path(__file__).resolve().parents[2])]
        settings = {"allowRoot": True, "storageRoots": roots}
        r = srv.http.patch("/api/v1/tenants/default", json=settings)
        assert r.status_code == 200, r.text
        yield srv
    finally:
        srv.stop()
