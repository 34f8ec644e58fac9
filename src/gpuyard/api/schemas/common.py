"""Shared pieces of the response bodies: camelCase JSON, ISO times, field errors."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
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
    detail: str
    errors: list[FieldErrorOut] = []
