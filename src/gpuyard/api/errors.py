"""Errors the services raise for people, turned into HTTP answers by `app.py`."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError
from starlette.exceptions import HTTPException

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


#: what FastAPI says (HTTP 400) when a body declared JSON cannot be read, whatever the cause
BODY_PARSE_DETAIL = "There was an error parsing the body"


def unreadable_body(exc: HTTPException) -> InvalidInput | None:
    """FastAPI's 400 for a body it could not read, as our 422 with the cause (an integer of
    more than 4300 digits, a byte that is not UTF-8); None for any other HTTP error."""
    if exc.status_code != 400 or exc.detail != BODY_PARSE_DETAIL or exc.__cause__ is None:
        return None
    cause = exc.__cause__
    if isinstance(cause, ValueError) and "digits" in str(cause):
        why = "it holds an integer of more than 4300 digits"
    else:
        why = f"it cannot be read as JSON ({type(cause).__name__})"
    return InvalidInput("the request body cannot be read", [("body", why)])
