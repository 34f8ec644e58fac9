"""The document a job was submitted as (OpenPAI v2), kept beside the converted spec.

Stored so that Clone and resubmit give back what the user wrote. Its secret values are
marked `{secret: VALUE}` before it is stored (the values of `secrets`, and the `password` of a
dockerimage prerequisite's `auth`), so that the store seals them and the API shows them only
to whoever may read the job's secrets; `unmark` turns a stored document back into the one
submitted (or the one with `<redacted>` in their place). Values JSON cannot hold (a YAML
date, say) are kept as their text.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from gpuyard.spec.fields import scalar_text
from gpuyard.spec.models import SECRET_KEY

REDACTED = "<redacted>"


def _marked(value: object) -> object:
    text = scalar_text(value)
    return {SECRET_KEY: text} if text is not None else value


def json_safe(doc: Any) -> Any:
    """`doc` as JSON can hold it: YAML's dates, binary and huge numbers (and any other value)
    as text, mapping keys as text."""
    if isinstance(doc, dict):
        return {_key(key): json_safe(value) for key, value in doc.items()}
    if isinstance(doc, list):
        return [json_safe(value) for value in doc]
    if doc is None or isinstance(doc, str | int | float | bool):
        return doc
    if isinstance(doc, date):
        return doc.isoformat()
    if isinstance(doc, bytes):
        return doc.decode("utf-8", "replace")
    return str(doc)


def _key(key: object) -> str:
    text = json_safe(key)
    return text if isinstance(text, str) else json.dumps(text)


def mark_secrets(doc: dict[str, Any]) -> dict[str, Any]:
    """A JSON-safe copy of the OpenPAI document with its secret values marked."""
    out = json_safe(doc)
    if isinstance(out.get("secrets"), dict):
        out["secrets"] = {key: _marked(value) for key, value in out["secrets"].items()}
    for entry in out.get("prerequisites") or []:
        auth = entry.get("auth") if isinstance(entry, dict) else None
        if isinstance(auth, dict) and "password" in auth:
            auth["password"] = _marked(auth["password"])
    return out


def unmark(doc: Any, reveal: bool) -> Any:
    """`doc` with each `{secret: VALUE}` replaced by VALUE (`reveal`) or `<redacted>`."""
    if isinstance(doc, dict):
        if len(doc) == 1 and isinstance(doc.get(SECRET_KEY), str):
            return doc[SECRET_KEY] if reveal else REDACTED
        return {key: unmark(value, reveal) for key, value in doc.items()}
    if isinstance(doc, list):
        return [unmark(value, reveal) for value in doc]
    return doc
