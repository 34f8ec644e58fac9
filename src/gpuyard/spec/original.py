"""The document a job was submitted as (OpenPAI v2), kept beside the converted spec.

Stored so that Clone and resubmit give back what the user wrote. Its secret values are
marked `{secret: VALUE}` before it is stored (the values of `secrets`, and the `password` of a
dockerimage prerequisite's `auth`), so that the store seals them and the API shows them only
to whoever may read the job's secrets; `unmark` turns a stored document back into the one
submitted (or the one with `<redacted>` in their place).
"""

from __future__ import annotations

import copy
from typing import Any

from gpuyard.spec.fields import scalar_text
from gpuyard.spec.models import SECRET_KEY

REDACTED = "<redacted>"


def _marked(value: object) -> object:
    text = scalar_text(value)
    return {SECRET_KEY: text} if text is not None else value


def mark_secrets(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of the OpenPAI document with its secret values marked."""
    out = copy.deepcopy(doc)
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
