"""Who may use an image stored on this node: a private image stays private after its pull.

Every tenant's tasks share the node's store, so an image that a task pulled with its registry
login must not start the next task that names it without one (Kubernetes' answer to the same
hole is the AlwaysPullImages admission plugin). Each image in the store's index says how it
came (`access`, durable in `index.json` with the rest of the entry):

- `public`: pulled without any login (a task without one, a warm): anyone could pull it, so
  every task may use the stored copy at once;
- `admin`: imported (`gpuyard image import`), or pulled by the node's admin on its data dir
  (`gpuyard image pull` without `--node`, with whatever credentials that admin has): shared
  with every tenant by the platform admin's act;
- `private`: pulled with a task's registry login. The registry's digest of the tag's manifest
  at that pull is kept too (`sourceDigest`: a pull into the store's OCI layout may convert the
  manifest, so the stored digest is not the registry's).

A task may use a private image only once the node has checked *its own* login against the
registry for that image (`registry_digest`: `skopeo inspect --raw` of the tag, the login in a
private auth file exactly as a pull has it, registryauth.py; never the node's credentials).
The digest must be the recorded one: another one means the tag moved on, and the task pulls it
anew with its login. A task without a login is checked anonymously: if the registry lets
anyone read the image, it is public after all (e.g. Docker Hub pulled with a login for its
rate limits). A check that passed counts for `VERIFY_TTL_S` per (image digest, login
fingerprint), in this process's memory only (`VerifiedLogins`: a restarted node checks again).

An index entry from before this rule (no `access`) counts as private when it was pulled (its
first check pulls it anew, then it is what that pull makes it), admin when it was imported.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuyard.model.registries import RegistryLogin, image_registry
from gpuyard.runtime import imagetools as tools
from gpuyard.runtime.errors import ImageError
from gpuyard.runtime.registryauth import auth_file
from gpuyard.runtime.registryerrors import classify

PUBLIC, ADMIN, PRIVATE = "public", "admin", "private"
VERIFY_TTL_S = 600.0  # a login the registry let read an image counts this long
START_MARGIN_S = 30.0  # a start launches at once only on a check with this much time left
MAX_VERIFIED = 4096  # (digest, login) pairs remembered; the oldest go first


def access_of(entry: Mapping[str, Any]) -> str:
    """How the image of an index entry came (`public`, `admin`, `private`)."""
    access = entry.get("access")
    if access in (PUBLIC, ADMIN, PRIVATE):
        return str(access)
    return PRIVATE if str(entry.get("source", "")).startswith("docker://") else ADMIN


def pull_access(login: RegistryLogin | None, node_credentials: bool) -> str:
    """The access of an image pulled with `login`, or without one (`node_credentials`: the
    node's admin pulling with whatever credentials it has)."""
    if login is not None:
        return PRIVATE
    return ADMIN if node_credentials else PUBLIC


class VerifiedLogins:
    """(image digest, login fingerprint) → when the registry last let that login read that
    image; a pair counts for `ttl_s` (`clock`: monotonic seconds, injected by tests). Bounded:
    at most `max_entries` pairs, the oldest dropped first. Thread-safe."""

    def __init__(self, ttl_s: float = VERIFY_TTL_S, clock: Callable[[], float] = time.monotonic,
                 max_entries: int = MAX_VERIFIED) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._max = max_entries
        self._lock = threading.Lock()
        self._at: OrderedDict[tuple[str, str], float] = OrderedDict()

    def record(self, digest: str, login: RegistryLogin | None) -> None:
        """The registry let `login` read `digest` now (anonymous access is never recorded:
        it makes the image public instead)."""
        if login is None:
            return
        now, key = self._clock(), (digest, login.fingerprint())
        with self._lock:
            self._at.pop(key, None)
            self._at[key] = now
            while self._at and (len(self._at) > self._max
                                or now - next(iter(self._at.values())) >= self.ttl_s):
                self._at.popitem(last=False)

    def fresh(self, digest: str, login: RegistryLogin | None, margin_s: float = 0.0) -> bool:
        """Whether `login` was let read `digest` less than `ttl_s - margin_s` ago."""
        if login is None:
            return False
        with self._lock:
            at = self._at.get((digest, login.fingerprint()))
        return at is not None and self._clock() - at < self.ttl_s - margin_s

    def __len__(self) -> int:
        with self._lock:
            return len(self._at)


def registry_digest(name: str, login: RegistryLogin | None, tmp: Path, timeout_s: float,
                    tls_verify: bool) -> str:
    """The digest of `name`'s manifest at its registry, read with `login` alone (anonymously
    without one); ImageError with skopeo's cause, never the password."""
    with auth_file(login, tmp) as path:
        try:
            return tools.skopeo_manifest_digest(f"docker://{name}", timeout_s, tls_verify, path)
        except ImageError as e:
            raise ImageError(redacted(str(e), login)) from e


def redacted(text: str, login: RegistryLogin | None) -> str:
    return text if login is None or not login.password else text.replace(login.password,
                                                                         "<redacted>")


def refusal(name: str, login: RegistryLogin | None, error: ImageError) -> ImageError:
    """The task's error when the registry did not let it use the private image `name`: what to
    do about it when the registry refused the login (never retried: the user's to mend), the
    registry's cause otherwise (a transient one is retried as a pull's is)."""
    registry = image_registry(name)
    if classify(str(error), name)[1] != "unauthorized":
        return ImageError(f"cannot check access to {name} at its registry: {error}")
    head = f"image {name} is on this node from a pull with a registry login"
    if login is None:
        return ImageError(
            f"{head}, and {registry} refuses it to a task without one ({error}): give the job "
            f"a login for {registry} (OpenPAI prerequisites auth), or ask a platform admin to "
            f"set your tenant's (gpuyard admin registry set TENANT {registry})")
    return ImageError(
        f"{head}, and {registry} refused this task's login (user {login.username}) for it "
        f"({error}): check the job's auth, or your tenant's registry login for {registry}")
