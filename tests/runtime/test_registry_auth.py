"""Pulls with a registry login, for real: skopeo against a registry on 127.0.0.1 that asks for
basic auth (tests/oci_registry.py), crun containers. The login reaches skopeo only in a private
auth file (0600 in a 0700 dir, gone after), never in its argv; a wrong password is `ImageError`
"unauthorized" at the first try; a task without a login never pulls with the node's own
credentials; a registry that refuses connections for a while is tried again until it answers."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuyard.model import TaskReason
from gpuyard.model.registries import RegistryLogin
from gpuyard.runtime.executor import ContainerRuntime
from gpuyard.runtime.registryauth import auth_document, auth_file
from gpuyard.runtime.types import TaskPhase
from oci_registry import Registry, busybox_layout, closed_port

from .helpers import MakeLaunch, wait_exited, wait_for

pytestmark = pytest.mark.container
MakeRuntime = Callable[..., ContainerRuntime]
PASSWORD = "s3cret-Pa55-for-the-registry"
SHIM = """#!/bin/sh
# records what skopeo is given (argv, the auth file's mode and its dir's), then runs it
for a in "$@"; do
  case "$a" in --src-authfile=*|--authfile=*) f="${a#*authfile=}"
    stat -c '%a' "$f" "$(dirname "$f")" >> "$SHIM_LOG"; cat "$f" >> "$SHIM_LOG"; echo >> "$SHIM_LOG";;
  esac
done
echo "argv: $*" >> "$SHIM_LOG"
exec REAL "$@"
"""


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("umoci", "skopeo"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (make system)")
    return busybox_layout(tmp_path_factory.mktemp("registry"), marker="private-image")


@pytest.fixture
def registry(layout: Path) -> Iterator[Registry]:
    served = Registry(layout, users={"alice": PASSWORD})
    yield served
    served.close()


@pytest.fixture
def shim_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """skopeo, as the node runs it, through a shim that writes down what it was given."""
    bin_dir, log = tmp_path / "shim", tmp_path / "skopeo.log"
    bin_dir.mkdir()
    real = shutil.which("skopeo")
    assert real is not None
    (bin_dir / "skopeo").write_text(SHIM.replace("REAL", real))
    (bin_dir / "skopeo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SHIM_LOG", str(log))
    return log


@pytest.fixture
def make_runtime(container_host: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                 ) -> Iterator[MakeRuntime]:
    made: list[ContainerRuntime] = []

    def make(**env: str) -> ContainerRuntime:
        for name, value in env.items():
            monkeypatch.setenv(f"GPUYARD_{name.upper()}", value)
        rt = ContainerRuntime(tmp_path / "state")
        made.append(rt)
        return rt

    yield make
    for rt in made:
        for key in rt.keys():  # noqa: SIM118 (a runtime, not a dict)
            rt.stop(key, 0)
            wait_exited(rt, key)
        rt.close()


def login(registry: Registry, password: str = PASSWORD) -> RegistryLogin:
    return RegistryLogin(registry.host, "alice", password)


def test_a_login_pulls_through_a_private_auth_file_never_on_the_command_line(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, registry: Registry, shim_log: Path
) -> None:
    rt = make_runtime(insecure_registries=registry.host)
    launch = make_launch("cat /etc/marker", image=f"{registry.host}/team/bb:1",
                         image_login=login(registry))
    rt.start(launch)
    assert PASSWORD not in repr(launch)
    assert wait_exited(rt, launch.key).reason == TaskReason.COMPLETED
    assert "private-image" in rt.read_log(launch.key).decode()
    # asked, then let in: the manifest's digest (for later logins' checks), then the copy
    assert registry.sent["refused"] >= 1 and registry.sent["manifest"] == 2
    text = shim_log.read_text()
    inspect, copy = [line for line in text.splitlines() if line.startswith("argv: ") and
                     "docker://" in line]
    assert " inspect --raw " in inspect and "--authfile=" in inspect and "--src-authfile=" in copy
    assert all(PASSWORD not in argv and "alice" not in argv for argv in (inspect, copy))
    assert text.splitlines()[:2] == ["600", "700"]  # the file, then its dir
    assert json.loads(text.splitlines()[2]) == auth_document(login(registry))
    assert not list((rt.images.root / "tmp").glob("auth-*"))  # removed after the pull


def test_a_wrong_password_is_unauthorized_at_once_and_never_shown(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, registry: Registry
) -> None:
    rt = make_runtime(insecure_registries=registry.host, image_pull_backoff_s="0.2")
    wrong = "not-the-Pa55word"
    launch = make_launch("true", image=f"{registry.host}/team/bb:1",
                         image_login=login(registry, wrong))
    rt.start(launch)
    exit_ = wait_exited(rt, launch.key)
    assert exit_.reason == TaskReason.IMAGE_ERROR, exit_
    assert "unauthorized" in exit_.message.lower() or "authentication required" in exit_.message
    assert "tries failed" not in exit_.message and wrong not in exit_.message
    assert registry.sent["manifest"] == 0


def test_a_task_without_a_login_never_uses_the_nodes_credentials(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, registry: Registry, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    for where in (home / ".docker" / "config.json", home / "run" / "containers" / "auth.json"):
        where.parent.mkdir(parents=True)
        where.write_text(json.dumps(auth_document(login(registry))))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(home / "run"))
    rt = make_runtime(insecure_registries=registry.host)
    rt.images.pull(f"{registry.host}/admin/bb:1")  # `gpuyard image pull`: the node's own
    launch = make_launch("true", image=f"{registry.host}/team/bb:1")
    rt.start(launch)
    exit_ = wait_exited(rt, launch.key)
    assert exit_.reason == TaskReason.IMAGE_ERROR and "tries failed" not in exit_.message


def test_a_registry_that_refuses_connections_for_a_while_is_tried_until_it_answers(
    make_runtime: MakeRuntime, make_launch: MakeLaunch, layout: Path
) -> None:
    port = closed_port()
    host = f"localhost:{port}"
    rt = make_runtime(insecure_registries=host, image_pull_tries="6", image_pull_backoff_s="0.3")
    launch = make_launch("cat /etc/marker", image=f"{host}/bb:1")
    rt.start(launch)
    seen: list[str] = []

    def noted(text: str) -> bool:
        st = rt.status(launch.key)
        if st.phase == TaskPhase.STARTING and st.detail and st.detail not in seen:
            seen.append(st.detail)
        return text in seen

    wait_for("a refused try", lambda: noted(f"pulling image {host}/bb:1 (attempt 2/6 after: "
                                            "connection refused)"))
    registry = Registry(layout, port=port)  # up now, on the address the node tries
    try:
        assert wait_exited(rt, launch.key).reason == TaskReason.COMPLETED
        assert "private-image" in rt.read_log(launch.key).decode()
    finally:
        registry.close()
    assert all("connection refused" in text for text in seen[1:]), seen


def test_the_auth_file_dir_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with auth_file(RegistryLogin("r.example:5000", "u", "p"), tmp_path / "tmp") as path:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
            assert json.loads(path.read_text())["auths"]["r.example:5000"]["auth"] == "dTpw"
    finally:
        os.umask(old)
    assert not path.exists() and not path.parent.exists()
