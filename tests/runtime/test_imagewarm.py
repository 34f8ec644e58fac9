"""Warming a node's images ahead of its tasks (runtime/imagewarm.py), for real: skopeo against a
registry on 127.0.0.1, the node's own pull queue. A warm pulls and unpacks once; a task started
afterwards finds its image present (its start says so, no pull); a warm joins a task's pull
under way instead of pulling again; a failed warm is not tried again at once; warms are bounded."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.imagewarm import BUSY, FAILED, PRESENT, PULLING
from oci_registry import HungRegistry, Registry, busybox_layout, closed_port

from .helpers import MakeLaunch, run_task, wait_for

pytestmark = pytest.mark.container


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    for tool in ("umoci", "skopeo"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make system)")
    served = Registry(busybox_layout(tmp_path_factory.mktemp("registry")))
    yield served
    served.close()


@pytest.fixture
def node(container_host: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         registry: Registry) -> Iterator[ContainerRuntime]:
    hung = HungRegistry()
    monkeypatch.setenv("GPUYARD_INSECURE_REGISTRIES", f"{registry.host},{hung.host}")
    monkeypatch.setenv("GPUYARD_IMAGE_PULL_TRIES", "1")
    rt = ContainerRuntime(tmp_path / "state")
    rt.hung = hung  # type: ignore[attr-defined]
    yield rt
    rt.close()
    hung.close()


def test_a_warmed_image_is_pulled_once_and_a_task_then_starts_with_it_present(
    node: ContainerRuntime, registry: Registry, make_launch: MakeLaunch
) -> None:
    image = f"{registry.host}/busybox:1"
    warmer = node.waiting.warmer
    before = registry.sent["blob"]
    assert warmer.warm(image).state == PULLING
    assert warmer.warm(image).state in (PULLING, PRESENT)  # asked again: the same pull
    wait_for("the warm to end", lambda: warmer.state(image).state == PRESENT)
    pulled = registry.sent["blob"] - before
    assert pulled > 0
    assert warmer.warm(image).state == PRESENT  # nothing pulled again
    launch = make_launch("cat /etc/marker", image=image)
    assert node.start(launch) == "image present"
    wait_for("the task to end", lambda: node.status(launch.key).exit is not None)
    assert registry.sent["blob"] - before == pulled
    assert [i.name for i in node.images.list()] == [image]


def test_a_warm_joins_the_pull_of_a_task_under_way(
    node: ContainerRuntime, registry: Registry, make_launch: MakeLaunch
) -> None:
    image = f"{registry.host}/busybox:1"
    before = registry.sent.copy()
    launch = make_launch("true", image=image)
    assert node.start(launch) == f"pulling image {image}"
    assert node.waiting.warmer.warm(image).state in (PULLING, PRESENT)
    wait_for("the task to end", lambda: node.status(launch.key).exit is not None)
    assert run_task(node, make_launch("true", image=image)).reason == "Completed"
    assert registry.sent - before == {"manifest": 1, "blob": 2}  # one pull (a layer, a config)


def test_a_failed_warm_is_not_tried_again_at_once_and_warms_are_bounded(
    node: ContainerRuntime,
) -> None:
    warmer = node.waiting.warmer
    gone = f"localhost:{closed_port()}/gone:1"
    assert warmer.warm(gone).state == PULLING
    wait_for("the warm to fail", lambda: warmer.state(gone).state == FAILED)
    again = warmer.warm(gone)
    assert again.state == FAILED and "connection refused" in (again.message or "")
    hung = node.hung  # type: ignore[attr-defined]
    warmer.max_warming = 2
    states = [warmer.warm(f"{hung.host}/slow:{n}").state for n in range(3)]
    assert states == [PULLING, PULLING, BUSY]
