"""Job arrays and dependencies in a spec: `array`, `arrayParameters` and `after`.

`array: "0-49%8"` makes one submission many jobs (its children), one per index: a list of
indices and ranges (`1,3,5-9`), a range may step (`0-20:2`), and `%N` lets at most N of them
run at once. `arrayParameters` gives each index its own values: a list of mappings, one per
index in ascending order; in our format they become the child's environment variables, in an
OpenPAI document its `parameters` (merged over the job's, for `<% $parameters.x %>`).
Both are read here, before the rest of the document, and are not part of a child's spec.

`after: {ok: [JOB], any: [JOB], notok: [JOB]}` (Slurm's afterok / afterany / afternotok) is
a field of the spec (`JobSpec.after`); `read_after` reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuyard.spec.errors import Errors, got, item, join, unknown_field
from gpuyard.spec.fields import read_env, scalar_text
from gpuyard.spec.models import After

ARRAY_KEY = "array"
PARAMETERS_KEY = "arrayParameters"
MAX_ARRAY_SIZE = 10_000  # children of one array
MAX_ARRAY_INDEX = 1_000_000
MAX_AFTER_JOBS = 100  # jobs one job may wait on, all kinds together
JOB_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
ARRAY_RULE = (
    "indices and ranges separated by commas, a range with an optional :step, and an optional "
    "%N (at most N running at once), like '0-49%8', '1,3,5-9' or '0-20:2'"
)
_ITEM = re.compile(r"(\d{1,7})(?:-(\d{1,7})(?::(\d{1,7}))?)?")


@dataclass(frozen=True, slots=True)
class ArrayRequest:
    """An array as submitted: its expression, its indices (ascending), its running limit
    (None: no limit) and each index's own parameters (None: none given)."""

    expression: str
    indices: tuple[int, ...]
    limit: int | None = None
    parameters: tuple[dict[str, Any], ...] | None = None


def _range(errs: Errors, path: str, text: str) -> list[int]:
    match = _ITEM.fullmatch(text.strip())
    if match is None:
        errs.add(path, f"'{text.strip()}' is not an index or a range: use {ARRAY_RULE}")
        return []
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    step = int(match.group(3)) if match.group(3) is not None else 1
    if last < first or step < 1:
        errs.add(path, f"'{text.strip()}': a range goes up (first-last) with a step of 1 or more")
        return []
    if last > MAX_ARRAY_INDEX:
        errs.add(path, f"'{text.strip()}': indices go up to {MAX_ARRAY_INDEX}")
        return []
    if (last - first) // step + 1 > MAX_ARRAY_SIZE:
        errs.add(path, f"'{text.strip()}' has more than {MAX_ARRAY_SIZE} indices")
        return []
    return list(range(first, last + 1, step))


def _limit(errs: Errors, path: str, text: str) -> int | None:
    if not text.strip().isdigit() or not 1 <= int(text.strip()[:8]) <= MAX_ARRAY_SIZE:
        errs.add(
            path,
            f"%{text.strip()}: the limit after % is a whole number from 1 to "
            f"{MAX_ARRAY_SIZE} (at most that many children run at once)",
        )
        return None
    return int(text)


def read_array(errs: Errors, path: str, value: object) -> tuple[tuple[int, ...], int | None]:
    """The indices (ascending) and running limit of an array expression; `((), None)` after
    an error (recorded at `path`)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        errs.add(path, f"must be text: {ARRAY_RULE}{got(value)}")
        return (), None
    if isinstance(value, int):
        errs.add(path, f"must be text, like '0-{max(value - 1, 0)}' for {value} jobs: {ARRAY_RULE}")
        return (), None
    before = len(errs.items)
    body, _, limit_text = value.partition("%")
    limit = _limit(errs, path, limit_text) if "%" in value else None
    indices: list[int] = []
    seen: set[int] = set()
    for part in body.split(","):
        for index in _range(errs, path, part):
            if index in seen:
                errs.add(path, f"index {index} is given twice")
                return (), None
            seen.add(index)
            indices.append(index)
        if len(indices) > MAX_ARRAY_SIZE:
            errs.add(path, f"has more than {MAX_ARRAY_SIZE} indices")
            return (), None
    if len(errs.items) > before:
        return (), None
    return tuple(sorted(indices)), limit


def read_array_parameters(
    errs: Errors, path: str, value: object, count: int, as_env: bool
) -> tuple[dict[str, Any], ...] | None:
    """One mapping per index; as environment variables (`as_env`, checked as `env` is) or as
    OpenPAI parameters (scalars)."""
    if not isinstance(value, list):
        errs.add(path, f"must be a list with one mapping per array index{got(value)}")
        return None
    if len(value) != count:
        errs.add(path, f"has {len(value)} entries for {count} array indices: give one per index")
        return None
    before = len(errs.items)
    for i, entry in enumerate(value):
        where = item(path, i)
        if as_env:
            read_env(errs, where, entry)
        elif not isinstance(entry, dict):
            errs.add(where, f"must be a mapping of parameter names to values{got(entry)}")
        else:
            for key, raw in entry.items():
                if scalar_text(raw) is None:
                    errs.add(
                        join(where, key), f"must be a string, a number or true/false{got(raw)}"
                    )
    if len(errs.items) > before:
        return None
    return tuple(dict(entry) for entry in value)  # as given: merged into each child's document


def read_array_request(errs: Errors, doc: dict[Any, Any], openpai: bool) -> ArrayRequest | None:
    """The array a document asks for (None: one job), errors at `array` / `arrayParameters`."""
    value = doc.get(ARRAY_KEY)
    parameters = doc.get(PARAMETERS_KEY)
    if value is None:
        if parameters is not None:
            errs.add(PARAMETERS_KEY, "is only for a job array: also give array, like '0-9'")
        return None
    indices, limit = read_array(errs, ARRAY_KEY, value)
    if not indices:
        return None
    per_index = None
    if parameters is not None:
        per_index = read_array_parameters(
            errs, PARAMETERS_KEY, parameters, len(indices), as_env=not openpai
        )
    return ArrayRequest(str(value), indices, limit, per_index)


def without_array(doc: dict[Any, Any]) -> dict[Any, Any]:
    """The document without its array fields: what each child is made of."""
    return {k: v for k, v in doc.items() if k not in (ARRAY_KEY, PARAMETERS_KEY)}


def with_parameters(doc: dict[Any, Any], values: dict[str, Any], openpai: bool) -> dict:
    """A child's document: `values` merged over the env (ours) or the parameters (OpenPAI)."""
    key = "parameters" if openpai else "env"
    base = doc.get(key)
    merged = {**base, **values} if isinstance(base, dict) else dict(values)
    return {**doc, key: merged}


def _job_ids(errs: Errors, path: str, value: object) -> tuple[str, ...]:
    ids = [value] if isinstance(value, str) else value
    if not isinstance(ids, list):
        errs.add(path, f"must be a list of job ids{got(value)}")
        return ()
    out: list[str] = []
    for i, given in enumerate(ids):
        where = item(path, i) if isinstance(value, list) else path
        # an id of digits only, unquoted in YAML, reads as a number
        job_id = str(given) if isinstance(given, int) and not isinstance(given, bool) else given
        if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id):
            errs.add(where, f"must be a job id (1 to 32 letters, digits, '_' or '-'){got(job_id)}")
        elif job_id not in out:
            out.append(job_id)
    return tuple(out)


def read_after(errs: Errors, path: str, value: object) -> After | None:
    """`after: {ok: [...], any: [...], notok: [...]}`: the jobs this one waits for."""
    if not isinstance(value, dict):
        errs.add(path, f"must be a mapping like {{ok: [JOB_ID], any: [JOB_ID]}}{got(value)}")
        return None
    kinds = ("ok", "any", "notok")
    for key in value:
        if key not in kinds:
            errs.add(join(path, key), unknown_field(key, kinds))
    lists = {k: _job_ids(errs, join(path, k), value[k]) for k in kinds if value.get(k) is not None}
    after = After(**lists)
    if len(after.job_ids) > MAX_AFTER_JOBS:
        errs.add(path, f"names {len(after.job_ids)} jobs; at most {MAX_AFTER_JOBS}")
        return None
    return after if after.job_ids else None
