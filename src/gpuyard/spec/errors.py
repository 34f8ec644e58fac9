"""Validation errors for people: each one names the field's dotted path and what is expected.

`Errors` collects every problem of a document so that a user sees them all at once;
`SpecError` carries them out of `load_job_spec` / `parse_job_spec`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

MAX_SHOWN_CHARS = 40


@dataclass(frozen=True, slots=True)
class HugeNumber:
    """An integer too long to be read (`limits.MAX_NUMBER_DIGITS`), kept as its text: no
    field takes it, so it is refused with the field's path instead of being converted (Python
    refuses int text of more than 4300 digits, a guard against quadratic-time conversion)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class FieldError:
    """One bad field: `path` is dotted (`taskRoles.worker.gpuNumber`, list items as `[i]`);
    an empty path means the document as a whole."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class SpecError(Exception):
    """A job spec that cannot be accepted; `.errors` lists every problem found."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: list[FieldError] = list(errors)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def to_list(self) -> list[dict[str, str]]:
        """The errors as JSON-ready `[{"path", "message"}]`, as the REST API returns them."""
        return [{"path": e.path, "message": e.message} for e in self.errors]


class Errors:
    """Collects `FieldError`s. `rename` maps a path before it is recorded (used to report
    an OpenPAI spec's problems under its own field names)."""

    def __init__(self, rename: Callable[[str], str] | None = None) -> None:
        self.items: list[FieldError] = []
        self.rename = rename

    def add(self, path: str, message: str) -> None:
        if self.rename is not None:
            path = self.rename(path)
        error = FieldError(path, message)
        if error not in self.items:
            self.items.append(error)

    def raise_if_any(self) -> None:
        if self.items:
            raise SpecError(self.items)


def join(base: str, key: object) -> str:
    """`join("taskRoles", "worker")` → `taskRoles.worker`; any key is written as text."""
    return f"{base}.{key}" if base else str(key)


def item(base: str, index: int) -> str:
    """`item("command", 1)` → `command[1]`: a list item."""
    return f"{base}[{index}]"


def show(value: object) -> str:
    """A value as a user would recognise it from their YAML: 'two', 3, true, null, a list."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "infinity" if not math.isnan(value) else "NaN"
    if isinstance(value, HugeNumber) or (isinstance(value, int) and abs(value) >= 10**40):
        return f"a number of {len(str(value).lstrip('+-'))} digits"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        text = value if len(value) <= MAX_SHOWN_CHARS else value[:MAX_SHOWN_CHARS] + "…"
        return repr(text) if value else "an empty string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"{type(value).__name__} {str(value)[:MAX_SHOWN_CHARS]}"


def got(value: object) -> str:
    """`, got 'two'`: the end of a message about a bad value."""
    return f", got {show(value)}"


def got_text(value: object) -> str:
    """`got` for a field that wants text, with a hint when YAML made a word a boolean."""
    if isinstance(value, bool):
        hint = "YAML reads unquoted yes/no/on/off as true/false: put the value in quotes"
        return f"{got(value)} ({hint})"
    return got(value)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def unknown_field(key: object, allowed: Iterable[str]) -> str:
    """'unknown field' with the closest allowed name, if one is close."""
    names = list(allowed)
    text = str(key)
    lowered = {n.lower(): n for n in names}
    guess = lowered.get(_camel(text).lower()) or lowered.get(text.lower())
    if guess is None:
        close = difflib.get_close_matches(text, names, n=1, cutoff=0.6)
        guess = close[0] if close else None
    if guess is not None:
        return f"unknown field; did you mean '{guess}'?"
    return "unknown field; allowed here: " + ", ".join(names)
