"""OpenPAI's `<% $parameters.key %>` references in commands, and their substitution.

Supported: `$parameters.KEY`, `$secrets.KEY`, and the role's own prerequisites
`$data.FIELD`, `$output.FIELD`, `$script.FIELD` (a field may be indexed: `$data.uri[0]`).
A reference that cannot be resolved is an error at the command line that holds it.
"""

from __future__ import annotations

import re
from typing import Any

from gpuyard.spec.errors import Errors
from gpuyard.spec.fields import scalar_text

_REF = re.compile(r"<%(.*?)%>", re.DOTALL)
_EXPR = re.compile(r"\$([A-Za-z_]\w*)((?:\.\w+|\[\d{1,9}\])*)")
_STEP = re.compile(r"\.(\w+)|\[(\d{1,9})\]")
_KEYED = {"parameters": "parameter", "secrets": "secret"}
ROOTS = ("parameters", "secrets", "data", "output", "script")


class Unresolved(ValueError):
    """A reference that names nothing; its message says what is missing."""


def _step(value: object, key: str | None, index: str | None, root: str) -> object:
    if key is not None and isinstance(value, dict) and key in value:
        return value[key]
    if index is not None and isinstance(value, list) and int(index) < len(value):
        return value[int(index)]
    if root in _KEYED and key is not None and isinstance(value, dict):
        known = ", ".join(str(k) for k in value) or "none"
        raise Unresolved(f"no {_KEYED[root]} named '{key}' (defined: {known})")
    raise Unresolved(f"${root} has no {'field ' + repr(key) if key else 'item ' + str(index)}")


def _root(expr: str) -> tuple[str, str]:
    match = _EXPR.fullmatch(expr.strip())
    if match is None or match.group(1) not in ROOTS:
        raise Unresolved("unknown reference; use $parameters.NAME or $secrets.NAME")
    return match.group(1), match.group(2)


def resolve(expr: str, scope: dict[str, Any]) -> str:
    """The text a reference stands for; raises `Unresolved`."""
    root, steps = _root(expr)
    value = scope.get(root)
    if value is None:
        raise Unresolved(f"this task role names no {root} prerequisite")
    for key, index in _STEP.findall(steps):
        value = _step(value, key or None, index or None, root)
    text = scalar_text(value)
    if text is None:
        raise Unresolved("refers to a list or mapping; only strings and numbers can be used")
    return text


def substitute(
    errs: Errors,
    path: str,
    text: str,
    scope: dict[str, Any],
    quiet: set[str] | frozenset = frozenset(),
    used: set[str] | None = None,
) -> str:
    """`text` with every `<% ... %>` replaced; unresolved references are recorded at `path`,
    except those to a `quiet` root (a section already reported as bad). The roots resolved
    (`secrets`, `parameters`, ...) are added to `used`."""

    def replace(match: re.Match[str]) -> str:
        try:
            text = resolve(match.group(1), scope)
            if used is not None:
                used.add(_root(match.group(1))[0])
            return text
        except Unresolved as problem:
            if not _is_quiet(match.group(1), quiet):
                errs.add(path, f"{match.group(0).strip()}: {problem}")
            return match.group(0)

    return _REF.sub(replace, text)


def _is_quiet(expr: str, quiet: set[str] | frozenset) -> bool:
    try:
        return _root(expr)[0] in quiet
    except Unresolved:
        return False
