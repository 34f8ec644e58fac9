"""Shared pieces of the response bodies: camelCase JSON, ISO times, field errors."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel, to_snake

_MB = re.compile(r"Mb(?=[A-Z]|$)")


def camel(name: str) -> str:
    """`memory_mb` → `memoryMB`, `retry_count` → `retryCount`: the API's JSON names."""
    return _MB.sub("MB", to_camel(name))


def camel_keys(data: Any) -> Any:
    """Plain JSON data with every dict key in the API's camelCase, recursively."""
    if isinstance(data, dict):
        return {camel(k): camel_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [camel_keys(v) for v in data]
    return data


def snake_keys(data: Any) -> Any:
    """The reverse of `camel_keys`: request JSON → Python field names (snake_case kept)."""
    if isinstance(data, dict):
        return {to_snake(k): snake_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [snake_keys(v) for v in data]
    return data


def _not_a_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {str(value).lower()}")
    return value


#: a number field that refuses true/false (lax typing reads them as 1 and 0)
NotBool = BeforeValidator(_not_a_bool)


class Out(BaseModel):
    model_config = ConfigDict(alias_generator=camel, populate_by_name=True)


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FieldErrorOut(Out):
    path: str
    message: str


class ErrorOut(Out):
    """The body of every error answer but 422: one sentence saying what went wrong."""

    detail: str


class InvalidOut(Out):
    """A 422: a sentence, and each bad field with its path (`quotas[0].guaranteed`,
    `taskRoles.worker.gpuNumber`, `body.deadline`, `query.limit`)."""

    detail: str
    errors: list[FieldErrorOut]


_ERROR_WORDS = {
    401: "no valid API token (`WWW-Authenticate: Bearer`)",
    403: "the caller may see this but not do it",
    404: "no such thing, or one of a tenant the caller has no role in",
    409: "it exists already, or its state forbids this",
    413: "the body is too large",
    422: "bad input: each bad field with its path",
    429: "too many at once: the sentence says which limit",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error codes, with the bodies actually sent."""
    return {
        code: {"model": InvalidOut if code == 422 else ErrorOut, "description": _ERROR_WORDS[code]}
        for code in codes
    }
