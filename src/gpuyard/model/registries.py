"""A login to a container registry: the value every layer passes from where it is set (a
tenant's credentials, a job's OpenPAI `auth`) to the node that pulls with it.

Its `password` (a password or a token) is never in its repr, so a launch or a login printed
to a log does not carry it. Registry hosts are compared in one form (`registry_host`):
`https://index.docker.io/v1/` and `docker.io` are one registry, as Docker and skopeo hold.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

DOCKER_HUB = "docker.io"
_HUB_ALIASES = frozenset({"index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"})


@dataclass(frozen=True, slots=True)
class RegistryLogin:
    registry: str  # host[:port], as `registry_host` gives it
    username: str
    password: str = field(repr=False)  # a password, or a token the registry takes as one

    def fingerprint(self) -> str:
        """Tells two logins apart (in memory: pulls with different logins are not shared)."""
        text = "\0".join((self.registry, self.username, self.password))
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def registry_host(uri: str) -> str:
    """`uri` (a registry's address, as OpenPAI's `registryuri` or `docker login` take it) as
    a host[:port], lower case: scheme and path cut, Docker Hub's aliases as `docker.io`."""
    text = uri.strip().lower()
    text = text.partition("://")[2] if "://" in text else text
    host = text.partition("/")[0]
    return DOCKER_HUB if host in _HUB_ALIASES or not host else host


def image_registry(name: str) -> str:
    """The registry host[:port] of an image name (`docker.io` for a name without one, as
    skopeo reads it)."""
    first, _, rest = name.partition("/")
    named = rest and ("." in first or ":" in first or first == "localhost")
    return registry_host(first) if named else DOCKER_HUB
