"""Registry credential bodies: what an admin sends (a username and a password or a token) and
what comes back (never the password or token)."""

from __future__ import annotations

from typing import Self

from pydantic import Field, SecretStr, model_validator

from gpuyard.api.schemas.common import Out, iso
from gpuyard.store import RegistryEntry

TOKEN_USER = "token"  # a token's username where the registry needs none (any name does)


class RegistryIn(Out):
    """A login: `username` + `password`, or `token` (with `username` where the registry
    wants one; `token` otherwise). Secrets are `SecretStr`: never in a repr or a 422."""

    username: str | None = Field(None, min_length=1, max_length=254)
    password: SecretStr | None = Field(None, min_length=1, max_length=4096)
    token: SecretStr | None = Field(None, min_length=1, max_length=4096)

    @model_validator(mode="after")
    def _one_secret(self) -> Self:
        if (self.password is None) == (self.token is None):
            raise ValueError("give a password (with a username) or a token, not both")
        if self.password is not None and self.username is None:
            raise ValueError("a password needs its username")
        return self

    def secret(self) -> str:
        value = self.password if self.password is not None else self.token
        assert value is not None
        return value.get_secret_value()

    def user(self) -> str:
        return self.username if self.username is not None else TOKEN_USER


class RegistryOut(Out):
    registry: str
    username: str
    updated_at: str | None
    updated_by: str | None


class RegistryList(Out):
    registries: list[RegistryOut]


def registry_out(e: RegistryEntry) -> RegistryOut:
    return RegistryOut(registry=e.registry, username=e.username, updated_at=iso(e.updated_at),
                       updated_by=e.updated_by)
