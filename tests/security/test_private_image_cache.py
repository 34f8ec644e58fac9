"""A private image in a node's shared store, against another tenant's tasks, for real: skopeo and
a registry on 127.0.0.1 that asks for basic auth (tests/oci_registry.py), crun containers.

Tenant A's task pulls `team/secret:1` with its own login. Before runtime/imageaccess.py, any
task naming that image on the node started from the stored copy without asking the registry,
so without any login. Now a task may use a private stored image only once the registry has let
*its own* login read it (the digest recorded at the pull): without a login, or with a wrong
password, it is refused (ImageError, never retried) and never starts; with a good login of its
own it starts from the store (no blob fetched again); a public image is shared unasked; a warm
never opens a private image to anyone; the tag moved on at the registry is a new pull; the
access is kept across a node restart.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuyard.model import TaskReason
from gpuyard.model.registries import RegistryLogin
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.imageaccess import PRIVATE, PUBLIC, VERIFY_TTL_S, VerifiedLogins
from gpuyard.runtime.imagewarm import FAILED, PRESENT
from gpuyard.runtime.types import TaskExit, TaskLaunch
from oci_registry import Registry, busybox_layout
from runtime.conftest import container_host, make_launch  # noqa: F401 - fixtures
from runtime.helpers import wait_exited, wait_for

pytestmark = pytest.mark.container
ALICE_PW, BOB_PW = "alice-Pa55-of-tenant-a", "bob-Pa55-of-tenant-b"
MakeLaunch = Callable[..., TaskLaunch]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    for tool in ("umoci", "skopeo"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make system)")
    base = tmp_path_factory.mktemp("images")
    (base / "v1").mkdir()
    (base / "v2").mkdir()
    return {"v1": busybox_layout(base / "v1", marker="private-image"),
            "v2": busybox_layout(base / "v2", marker="pushed-again")}


@pytest.fixture
def registry(layouts: dict[str, Path]) -> Iterator[Registry]:
    served = Registry(layouts["v1"], users={"alice": ALICE_PW, "bob": BOB_PW})
    yield served
    served.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_node(container_host: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
              registry: Registry, clock: Clock) -> Iterator[Callable[[], ContainerRuntime]]:
    """A node on the test's state root (a second call: the node restarted on it)."""
    monkeypatch.setenv("GPUYARD_INSECURE_REGISTRIES", registry.host)
    monkeypatch.setenv("GPUYARD_IMAGE_PULL_TRIES", "2")
    monkeypatch.setenv("GPUYARD_IMAGE_PULL_BACKOFF_S", "0.1")
    made: list[ContainerRuntime] = []

    def make() -> ContainerRuntime:
        if made:
            made[-1].close()
        rt = ContainerRuntime(tmp_path / "state")
        rt.images.verified = VerifiedLogins(clock=clock)
        made.append(rt)
        return rt

    yield make
    for key in made[-1].keys():  # noqa: SIM118 (a runtime, not a dict)
        made[-1].stop(key, 0)
        wait_exited(made[-1], key)
    made[-1].close()


@pytest.fixture
def node(make_node: Callable[[], ContainerRuntime]) -> ContainerRuntime:
    return make_node()


def secret(registry: Registry) -> str:
    return f"{registry.host}/team/secret:1"


def alice(registry: Registry, password: str = ALICE_PW) -> RegistryLogin:
    return RegistryLogin(registry.host, "alice", password)


def bob(registry: Registry, password: str = BOB_PW) -> RegistryLogin:
    return RegistryLogin(registry.host, "bob", password)


def run(node: ContainerRuntime, launch: TaskLaunch) -> tuple[str | None, TaskExit]:
    """What the start found of the image, and how the task ended."""
    found = node.start(launch)
    return found, wait_exited(node, launch.key)


def pulled_by_tenant_a(node: ContainerRuntime, registry: Registry, launch: MakeLaunch) -> None:
    found, end = run(node, launch("cat /etc/marker", image=secret(registry),
                                  image_login=alice(registry)))
    assert found == f"pulling image {secret(registry)}"
    assert end.reason == TaskReason.COMPLETED, end
    [info] = node.images.list()
    assert info.access == PRIVATE


def never_started(node: ContainerRuntime, key: str) -> bool:
    td = node.task_dir(key)
    return not td.started.exists() and not td.task.exists() and not node.read_log(key)


def test_a_task_without_a_login_is_refused_and_never_starts_from_the_cache(
    node: ContainerRuntime, registry: Registry, make_launch: MakeLaunch  # noqa: F811
) -> None:
    pulled_by_tenant_a(node, registry, make_launch)
    blobs = registry.sent["blob"]
    launch = make_launch("cat /etc/marker", image=secret(registry))
    found, end = run(node, launch)
    assert found == f"checking registry access to image {secret(registry)}"
    assert end.reason == TaskReason.IMAGE_ERROR, end  # the user's to mend: never retried
    assert "refuses it to a task without one" in end.message, end.message
    assert f"gpuyard admin registry set TENANT {registry.host}" in end.message
    assert "tries failed" not in end.message
    assert never_started(node, launch.key)
    assert registry.sent["blob"] == blobs
    assert node.images.list()[0].access == PRIVATE  # refused: still private


def test_a_wrong_password_is_refused_and_never_shown(
    node: ContainerRuntime, registry: Registry, make_launch: MakeLaunch  # noqa: F811
) -> None:
    pulled_by_tenant_a(node, registry, make_launch)
    wrong = "guessed-Pa55word"
    for login in (alice(registry, wrong), bob(registry, wrong)):
        launch = make_launch("cat /etc/marker", image=secret(registry), image_login=login)
        found, end = run(node, launch)
        assert found == f"checking registry access to image {secret(registry)}"
        assert end.reason == TaskReason.IMAGE_ERROR, end
        assert f"refused this task's login (user {login.username})" in end.message, end.message
        assert wrong not in end.message and "tries failed" not in end.message
        assert never_started(node, launch.key)


def test_a_login_of_its_own_starts_from_the_cache_without_fetching_a_blob_again(
    node: ContainerRuntime, registry: Registry, make_launch: MakeLaunch,  # noqa: F811
    clock: Clock
) -> None:
    pulled_by_tenant_a(node, registry, make_launch)
    before = registry.sent.copy()
    launch = make_launch("cat /etc/marker", image=secret(registry), image_login=bob(registry))
    found, end = run(node, launch)
    assert found == f"checking registry access to image {secret(registry)}"
    assert end.reason == TaskReason.COMPLETED, end
    assert "private-image" in node.read_log(launch.key).decode()
    assert registry.sent["blob"] == before["blob"]  # no blob fetched again
    assert registry.sent["manifest"] == before["manifest"] + 1  # its login checked, once
    seen = registry.sent.copy()
    again = make_launch("true", image=secret(registry), image_login=bob(registry))
    clock.now += VERIFY_TTL_S - 60  # within the check's time, and the start's margin
    found, end = run(node, again)
    assert found == "image present" and end.reason == TaskReason.COMPLETED, end
    assert registry.sent == seen  # the registry not asked again
    clock.now += 60  # the check expired: asked again
    late = make_launch("true", image=secret(registry), image_login=bob(registry))
    found, end = run(node, late)
    assert found == f"checking registry access to image {secret(registry)}"
    assert end.reason == TaskReason.COMPLETED and registry.sent["manifest"] == seen["manifest"] + 1
    assert registry.sent["blob"] == before["blob"]


def test_a_public_image_is_shared_without_asking_the_registry(
    node: ContainerRuntime, layouts: dict[str, Path], make_launch: MakeLaunch  # noqa: F811
) -> None:
    public = Registry(layouts["v1"])  # anyone may pull
    try:
        node.images.insecure_registries = frozenset({public.host})
        image = f"{public.host}/library/bb:1"
        found, end = run(node, make_launch("true", image=image))
        assert found == f"pulling image {image}" and end.reason == TaskReason.COMPLETED, end
        assert node.images.list()[0].access == PUBLIC
        seen = public.sent.copy()
        other = make_launch("cat /etc/marker", image=image)  # another tenant's, no login
        found, end = run(node, other)
        assert found == "image present" and end.reason == TaskReason.COMPLETED, end
        assert public.sent == seen  # no check, no pull
    finally:
        public.close()


def test_a_warm_never_opens_a_private_image(
    node: ContainerRuntime, registry: Registry, make_launch: MakeLaunch  # noqa: F811
) -> None:
    warmer = node.waiting.warmer
    assert warmer.warm(secret(registry)).state != PRESENT  # anonymous: refused, nothing stored
    wait_for("the warm to fail", lambda: warmer.state(secret(registry)).state == FAILED)
    assert "unauthorized" in (warmer.state(secret(registry)).message or "")
    assert node.images.list() == []
    pulled_by_tenant_a(node, registry, make_launch)
    assert warmer.warm(secret(registry), retry_failed=True).state == PRESENT  # its files are
    launch = make_launch("true", image=secret(registry))
    found, end = run(node, launch)
    assert end.reason == TaskReason.IMAGE_ERROR and never_started(node, launch.key), end
    assert node.images.list()[0].access == PRIVATE


def test_the_tag_moved_on_is_a_new_pull_with_the_tasks_login(
    node: ContainerRuntime, registry: Registry, layouts: dict[str, Path],
    make_launch: MakeLaunch  # noqa: F811
) -> None:
    pulled_by_tenant_a(node, registry, make_launch)
    old = node.images.list()[0].digest
    registry.layout = layouts["v2"]  # `team/secret:1` pushed again
    blobs = registry.sent["blob"]
    launch = make_launch("cat /etc/marker", image=secret(registry), image_login=bob(registry))
    found, end = run(node, launch)
    assert found == f"checking registry access to image {secret(registry)}"
    assert end.reason == TaskReason.COMPLETED, end
    assert "pushed-again" in node.read_log(launch.key).decode()
    assert registry.sent["blob"] > blobs
    [info] = node.images.list()
    assert info.digest != old and info.access == PRIVATE


def test_the_access_outlives_a_node_restart_and_a_registry_down_is_retried(
    make_node: Callable[[], ContainerRuntime], registry: Registry,
    make_launch: MakeLaunch  # noqa: F811
) -> None:
    node = make_node()
    pulled_by_tenant_a(node, registry, make_launch)
    node = make_node()  # restarted: the index is on disk, the checks were in memory
    assert node.images.list()[0].access == PRIVATE
    found, end = run(node, make_launch("true", image=secret(registry)))
    assert end.reason == TaskReason.IMAGE_ERROR, end
    registry.close()  # not a refusal: a platform failure, retried as a pull's
    launch = make_launch("true", image=secret(registry), image_login=alice(registry))
    found, end = run(node, launch)
    assert found == f"checking registry access to image {secret(registry)}"
    assert end.reason == TaskReason.REGISTRY_UNAVAILABLE, end
    assert "2 tries failed (connection refused)" in end.message, end.message
    assert never_started(node, launch.key)


def test_an_image_pulled_with_a_login_that_anyone_may_pull_becomes_public(
    node: ContainerRuntime, layouts: dict[str, Path], make_launch: MakeLaunch  # noqa: F811
) -> None:
    """Docker Hub's case: a tenant pulls with a login (for its rate limits) what anyone may."""
    public = Registry(layouts["v1"])
    try:
        node.images.insecure_registries = frozenset({public.host})
        image = f"{public.host}/library/bb:1"
        login = RegistryLogin(public.host, "carol", "for-the-rate-limits")
        found, end = run(node, make_launch("true", image=image, image_login=login))
        assert end.reason == TaskReason.COMPLETED and node.images.list()[0].access == PRIVATE
        found, end = run(node, make_launch("true", image=image))  # checked anonymously: yes
        assert found == f"checking registry access to image {image}"
        assert end.reason == TaskReason.COMPLETED, end
        assert node.images.list()[0].access == PUBLIC
        seen = public.sent.copy()
        found, end = run(node, make_launch("true", image=image))
        assert found == "image present" and public.sent == seen
    finally:
        public.close()
