"""Who may use a stored image (runtime/imageaccess.py), without a registry or a container: the
cache of logins the registry let read an image (an injected clock), the access of index entries
old and new, the refusal's words and class, and the store's decisions on a hand-made index with
the registry's answer stubbed (the real registry: tests/security/test_private_image_cache.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuyard.model.registries import RegistryLogin
from gpuyard.runtime import images as images_module
from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.imageaccess import (
    ADMIN,
    PRIVATE,
    PUBLIC,
    START_MARGIN_S,
    VERIFY_TTL_S,
    VerifiedLogins,
    access_of,
    pull_access,
    refusal,
)
from gpuyard.runtime.images import ImageStore
from gpuyard.runtime.registryerrors import classify

IMAGE = "registry.lan:5000/team/secret:1"
DIGEST = "sha256:" + "a" * 64
AT_REGISTRY = "sha256:" + "b" * 64
ALICE = RegistryLogin("registry.lan:5000", "alice", "pw-a")
BOB = RegistryLogin("registry.lan:5000", "bob", "pw-b")


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_a_check_counts_for_its_time_and_no_longer() -> None:
    clock = Clock()
    cache = VerifiedLogins(clock=clock)
    assert cache.ttl_s == VERIFY_TTL_S == 600.0
    assert not cache.fresh(DIGEST, ALICE)
    cache.record(DIGEST, ALICE)
    clock.now += VERIFY_TTL_S - 0.001
    assert cache.fresh(DIGEST, ALICE)
    assert not cache.fresh(DIGEST, ALICE, margin_s=START_MARGIN_S)  # too late for a start
    clock.now += 0.001
    assert not cache.fresh(DIGEST, ALICE)
    cache.record(DIGEST, ALICE)  # checked again: counts from now
    clock.now += VERIFY_TTL_S / 2
    assert cache.fresh(DIGEST, ALICE)


def test_a_check_is_for_that_login_and_that_digest_only() -> None:
    cache = VerifiedLogins(clock=Clock())
    cache.record(DIGEST, ALICE)
    assert not cache.fresh(DIGEST, BOB)
    assert not cache.fresh(DIGEST, RegistryLogin(ALICE.registry, "alice", "another-pw"))
    assert not cache.fresh(DIGEST, RegistryLogin("other.lan", "alice", "pw-a"))
    assert not cache.fresh(AT_REGISTRY, ALICE)
    assert not cache.fresh(DIGEST, None)


def test_anonymous_access_is_never_remembered() -> None:
    cache = VerifiedLogins(clock=Clock())
    cache.record(DIGEST, None)
    assert len(cache) == 0 and not cache.fresh(DIGEST, None)


def test_the_cache_is_bounded_and_drops_expired_and_oldest_checks() -> None:
    clock = Clock()
    cache = VerifiedLogins(clock=clock, max_entries=3)
    logins = [RegistryLogin("r.lan", f"u{i}", "pw") for i in range(5)]
    for login in logins:
        cache.record(DIGEST, login)
        clock.now += 1
    assert len(cache) == 3
    assert [cache.fresh(DIGEST, login) for login in logins] == [False, False, True, True, True]
    clock.now += VERIFY_TTL_S
    cache.record(AT_REGISTRY, ALICE)  # the expired ones go at the next record
    assert len(cache) == 1


def test_the_access_of_entries_old_and_new() -> None:
    assert pull_access(ALICE, node_credentials=False) == PRIVATE
    assert pull_access(None, node_credentials=False) == PUBLIC  # a task's or a warm's pull
    assert pull_access(None, node_credentials=True) == ADMIN  # `gpuyard image pull` on a node
    assert access_of({"access": PUBLIC, "source": f"docker://{IMAGE}"}) == PUBLIC
    # from before the rule: a pull might have had a login, an import is the admin's
    assert access_of({"source": f"docker://{IMAGE}"}) == PRIVATE
    assert access_of({"source": "oci-archive:/tmp/x.tar"}) == ADMIN


def test_a_refusal_says_what_to_do_and_is_never_retried() -> None:
    cause = ImageError(f"skopeo inspect failed: reading manifest 1 in {IMAGE[:-2]}: unauthorized")
    no_login = refusal(IMAGE, None, cause)
    assert "refuses it to a task without one" in str(no_login)
    assert "gpuyard admin registry set TENANT registry.lan:5000" in str(no_login)
    wrong = refusal(IMAGE, ALICE, cause)
    assert "refused this task's login (user alice)" in str(wrong) and "pw-a" not in str(wrong)
    assert classify(str(no_login), IMAGE) == (False, "unauthorized")
    assert classify(str(wrong), IMAGE) == (False, "unauthorized")
    down = refusal(IMAGE, ALICE, ImageError("skopeo inspect failed: dial tcp: connection refused"))
    assert str(down).startswith(f"cannot check access to {IMAGE} at its registry: ")
    assert classify(str(down), IMAGE) == (True, "connection refused")  # retried as a pull's


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ImageStore:
    """A store whose index holds IMAGE, private, unpacked; the registry answers AT_REGISTRY."""
    made = ImageStore(tmp_path / "state", pull=True, insecure_registries=())
    made.verified = VerifiedLogins(clock=Clock())
    made.index_file.write_text(json.dumps({"images": {IMAGE: {
        "digest": DIGEST, "ref": "img-x", "source": f"docker://{IMAGE}", "importedAt": 1.0,
        "lastUsed": 1.0, "blobBytes": 10, "access": PRIVATE, "sourceDigest": AT_REGISTRY}},
        "sizes": {}}))
    bundle = made.unpacked_dir / DIGEST.partition(":")[2]
    (bundle / "rootfs").mkdir(parents=True)
    (bundle / "image.json").write_text("{}")
    asked: list[RegistryLogin | None] = []

    def answer(name: str, login: RegistryLogin | None, *_: object) -> str:
        asked.append(login)
        if login not in (None, ALICE):
            return AT_REGISTRY
        raise ImageError(f"skopeo inspect failed: reading manifest 1 in {name}: unauthorized")

    monkeypatch.setattr(images_module, "registry_digest", answer)
    made.asked = asked  # type: ignore[attr-defined]
    return made


def test_the_store_asks_the_registry_before_a_task_uses_a_private_image(
    store: ImageStore,
) -> None:
    assert store.fetch_needed(IMAGE) is None  # a warm: its files are here
    assert store.task_needs(IMAGE, BOB) == "verify"
    assert store.task_needs(IMAGE, None) == "verify"
    assert store.resolve(IMAGE, login=BOB).digest == DIGEST
    assert store.asked == [BOB]  # type: ignore[attr-defined]
    assert store.task_needs(IMAGE, BOB) is None  # checked: starts at once
    assert store.task_needs(IMAGE, ALICE) == "verify"  # another login is checked on its own
    with pytest.raises(ImageError, match=r"refused this task's login \(user alice\)"):
        store.resolve(IMAGE, login=ALICE)
    with pytest.raises(ImageError, match="refuses it to a task without one"):
        store.resolve(IMAGE)
    assert store.list()[0].access == PRIVATE


def test_a_moved_tag_is_pulled_anew_with_the_tasks_login(
    store: ImageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(images_module, "registry_digest", lambda *_: "sha256:" + "c" * 64)
    pulls: list[tuple[str, RegistryLogin | None, bool]] = []

    def pull(name: str, timeout_s: float, login: RegistryLogin | None,
             node_credentials: bool) -> None:
        pulls.append((name, login, node_credentials))
        raise ImageError("stopped here")

    monkeypatch.setattr(store, "pull", pull)
    with pytest.raises(ImageError, match="changed at its registry and could not be pulled"):
        store.resolve(IMAGE, login=BOB)
    assert pulls == [(IMAGE, BOB, False)]
