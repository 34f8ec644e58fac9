"""Pulls in the background, for real: skopeo against registries on 127.0.0.1 (tests/oci_registry),
crun containers. `start` of a task whose image is not here returns at once; the task waits
STARTING with a detail, shares one pull with every task on that image, is launched when the
image is in, retried with backoff on transient failures (counted, capped, then
`RegistryUnavailable`, which the controller retries as a platform failure), ended `ImageError`
on a permanent one, stopped at once while it waits, and resumed by the next runtime on the
state root (a server restart) exactly once."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuyard.model import TaskReason
from gpuyard.runtime.errors import RuntimeStartError, TaskStillRunning
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.types import TaskPhase
from oci_registry import HungRegistry, Registry, busybox_layout, closed_port

from .helpers import MakeLaunch, run_task, wait_exited, wait_for

pytestmark = pytest.mark.container
MakeRuntime = Callable[..., ContainerRuntime]


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("umoci", "skopeo"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make system)")
    return busybox_layout(tmp_path_factory.mktemp("registry"))


@pytest.fixture
def make_runtime(container_host: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                 ) -> Iterator[MakeRuntime]:
    """Runtimes on one state root, made with `GPUYARD_*` settings given as keywords."""
    made: list[ContainerRuntime] = []

    def make(**env: str) -> ContainerRuntime:
        for name, value in env.items():
            monkeypatch.setenv(f"GPUYARD_{name.upper()}", value)
        rt = ContainerRuntime(tmp_path / "state")
        made.append(rt)
        return rt

    yield make
    for rt in made:
        leftover = rt.keys()
        for key in leftover:
            rt.stop(key, 0)
            wait_exited(rt, key)
        rt.close()


def detail(rt: ContainerRuntime, key: str) -> str | None:
    st = rt.status(key)
    return st.detail if st.phase == TaskPhase.STARTING else None


def test_a_hung_registry_holds_up_neither_start_nor_other_tasks(
    make_runtime: MakeRuntime, make_launch: MakeLaunch
) -> None:
    hung = HungRegistry()
    try:
        rt = make_runtime(insecure_registries=hung.host)  # plain HTTP: hangs for good
        image = f"{hung.host}/evil:1"
        waiting = make_launch("echo never", image=image)
        rt.start(waiting)  # returns at once: the pull is the node's, in the background
        assert detail(rt, waiting.key) == f"pulling image {image}"
        other = make_launch("echo hi")
        assert run_task(rt, other).reason == TaskReason.COMPLETED
        wait_for("skopeo to reach the registry", lambda: hung.accepted > 0)
        assert detail(rt, waiting.key) == f"pulling image {image}"  # still waiting
        with pytest.raises(TaskStillRunning):
            rt.remove(waiting.key)
        rt.stop(waiting.key, 10)  # at once, whatever the grace: no container yet
        ended = rt.status(waiting.key)
        assert ended.phase == TaskPhase.EXITED and ended.exit is not None
        assert ended.exit.reason == TaskReason.CANCELLED and ended.exit.stop_requested
        assert rt.waiting.pulls.waiting() == {image: set()}  # it left the pull's waiters
        rt.remove(waiting.key)
        assert rt.keys() == [other.key]
    finally:
        hung.close()


def test_a_refusing_registry_is_retried_with_backoff_then_registry_unavailable(
    make_runtime: MakeRuntime, make_launch: MakeLaunch
) -> None:
    rt = make_runtime(image_pull_tries="3", image_pull_backoff_s="0.5")
    image = f"localhost:{closed_port()}/gone:1"
    launch = make_launch("true", image=image)
    rt.start(launch)
    seen: list[str] = []

    def ended() -> bool:
        text = detail(rt, launch.key)
        if text and text not in seen:
            seen.append(text)
        return rt.status(launch.key).phase == TaskPhase.EXITED

    wait_for("the pull to give up", ended)
    exit_ = rt.status(launch.key).exit
    assert exit_ is not None and exit_.reason == TaskReason.REGISTRY_UNAVAILABLE
    assert exit_.message.startswith("3 tries failed (connection refused); the last: ")
    assert "connection refused" in exit_.message.rpartition("the last: ")[2]
    assert seen[0] == f"pulling image {image}"
    assert f"pulling image {image} (attempt 2/3 after: connection refused)" in seen


def test_tasks_on_one_image_share_one_pull_and_run_once_it_is_in(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, layout: Path
) -> None:
    registry = Registry(layout)
    try:
        rt = make_runtime(insecure_registries=registry.host)
        launches = [make_launch("cat /etc/marker", image=f"{registry.host}/bb:1") for _ in range(3)]
        for launch in launches:
            rt.start(launch)
        for launch in launches:
            assert wait_exited(rt, launch.key).reason == TaskReason.COMPLETED
            assert "from-the-registry" in rt.read_log(launch.key).decode()
        assert registry.sent["manifest"] == 1  # one pull for the three
        assert [i.name for i in rt.images.list()] == [f"{registry.host}/bb:1"]
        again = make_launch("true", image=f"{registry.host}/bb:1")
        rt.start(again)  # on the node now: launched within start, no pull
        assert rt.status(again.key).detail is None and registry.sent["manifest"] == 1
    finally:
        registry.close()


def test_a_permanent_failure_ends_the_task_at_the_first_try(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, layout: Path
) -> None:
    registry = Registry(layout)
    try:
        rt = make_runtime(insecure_registries=registry.host, image_pull_backoff_s="0.1")
        launch = make_launch("true", image=f"{registry.host}/bb:no-such-tag")
        rt.start(launch)
        exit_ = wait_exited(rt, launch.key)
        assert exit_.reason == TaskReason.IMAGE_ERROR and "manifest unknown" in exit_.message
        assert "tries failed" not in exit_.message
    finally:
        registry.close()


def test_an_imported_image_is_unpacked_in_the_background(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, layout: Path, tmp_path: Path
) -> None:
    rt = make_runtime()
    archive = tmp_path / "bb.tar"
    shutil.make_archive(str(tmp_path / "bb"), "tar", layout)
    rt.images.import_file(archive, "bb:local", "oci-archive")
    launch = make_launch("cat /etc/marker", image="bb:local")
    assert rt.images.fetch_needed("bb:local") == "unpack"
    rt.start(launch)
    assert wait_exited(rt, launch.key).reason == TaskReason.COMPLETED
    assert rt.images.fetch_needed("bb:local") is None


def test_a_restarted_node_resumes_the_wait_and_launches_once(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, layout: Path
) -> None:
    hung = HungRegistry()
    image = f"{hung.host}/bb:1"
    first = make_runtime(insecure_registries=hung.host)
    launch = make_launch("echo ran-once", image=image)
    first.start(launch)
    wait_for("skopeo to reach the registry", lambda: hung.accepted > 0)
    first.close()  # as a server killed mid-pull: the marker stays, nothing is launched
    port = hung.port
    hung.close()
    registry = Registry(layout, port=port)  # the registry answers now, on the same address
    try:
        time.sleep(0.5)  # the first runtime's skopeo ends (reset); it launches nothing
        assert detail(first, launch.key) == f"pulling image {image}"
        second = make_runtime()
        assert wait_exited(second, launch.key).reason == TaskReason.COMPLETED
        assert second.read_log(launch.key).decode().count("ran-once") == 1
        with pytest.raises(RuntimeStartError, match="already exists"):
            second.start(launch)
        third = make_runtime()  # nothing is left to resume
        assert third.waiting.pulls.waiting() == {}
        assert second.read_log(launch.key).decode().count("ran-once") == 1
    finally:
        registry.close()


def test_the_pool_is_bounded_and_an_image_a_task_waits_for_is_never_collected(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, layout: Path, tmp_path: Path
) -> None:
    hung = HungRegistry()
    try:
        rt = make_runtime(insecure_registries=hung.host, image_pull_workers="1",
                          image_pull_tries="1", image_pull_timeout_s="4")
        first = make_launch("true", image=f"{hung.host}/evil:1")
        rt.start(first)  # takes the only worker until its timeout
        wait_for("skopeo to reach the registry", lambda: hung.accepted > 0)
        shutil.make_archive(str(tmp_path / "bb"), "tar", layout)
        rt.images.import_file(tmp_path / "bb.tar", "bb:queued", "oci-archive")
        queued = make_launch("cat /etc/marker", image="bb:queued")
        rt.start(queued)
        assert detail(rt, queued.key) == "unpacking image bb:queued"  # behind the hung pull
        rt.images.recent_use_s = 0
        assert rt.images.gc(budget_gb=0) == []  # waited for: kept, though never used yet
        timed_out = wait_exited(rt, first.key)
        assert timed_out.reason == TaskReason.REGISTRY_UNAVAILABLE
        assert timed_out.message.startswith("1 try failed (timeout); the last: ")
        assert wait_exited(rt, queued.key).reason == TaskReason.COMPLETED
    finally:
        hung.close()
