"""Errors the services raise for people, turned into HTTP answers by `app.py`."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from gpuyard.api.schemas.common import camel


class InvalidInput(Exception):
    """A request body with bad fields (HTTP 422): each error names its path."""

    def __init__(self, detail: str, errors: Iterable[tuple[str, str]]) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = [{"path": p, "message": m} for p, m in errors]


class Conflict(Exception):
    """The thing exists already, or is in a state that forbids this (HTTP 409)."""


def field_path(loc: Iterable[object]) -> str:
    """A pydantic error location (`('quotas', 0, 'guaranteed')`) as `quotas[0].guaranteed`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + camel(str(part))
    return out


def invalid_from(what: str, exc: ValidationError) -> InvalidInput:
    errors = [(field_path(e["loc"]), e["msg"]) for e in exc.errors()]
    n = len(errors)
    return InvalidInput(f"the {what} has {n} error{'s' if n != 1 else ''}", errors)
