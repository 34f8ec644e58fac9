"""Submitting many jobs at once: job arrays (one spec, a child per index) and batches
(`POST /api/v1/jobs:batch`, a list of specs), each stored all-or-nothing in one transaction.

Every spec is checked as a single submission is (`jobs.new_job`, its `after` included:
dependencies.py). A batch reports every error of every spec at once, each at
`jobs[i].<path>`; an array's children share one checked job unless `arrayParameters` gives
each its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuyard.api.authz import Forbidden, authorize_submit
from gpuyard.api.errors import InvalidInput
from gpuyard.api.schemas import Submitted
from gpuyard.api.services import jobs as svc
from gpuyard.controller import Controller
from gpuyard.spec import FieldError, LoadedJob, SpecError, array_children, parse_job
from gpuyard.spec.errors import item, join
from gpuyard.store import NewArray, NewJob, Stored, UserRecord

MAX_BATCH_JOBS = 1000  # specs in one batch (an array counts once)
MAX_BATCH_CHILDREN = 10_000  # jobs in one batch, every array's children counted
BATCH_KEY = "jobs"


def entry_for(ctl: Controller, caller: UserRecord, loaded: LoadedJob) -> NewJob | NewArray:
    """What to store for one checked spec: a job, or an array with its children."""
    if loaded.array is None:
        return svc.new_job(ctl, loaded.spec, caller.name, loaded)
    shared: dict[int, NewJob] = {}
    children = []
    for index, child in array_children(loaded):
        key = id(child)  # children without their own parameters share one NewJob
        if key not in shared:
            shared[key] = svc.new_job(ctl, child.spec, caller.name, child)
        children.append((index, shared[key]))
    spec = loaded.spec
    array = loaded.array
    return NewArray(spec.name, spec.tenant, caller.name, array.expression, array.limit, children)


def submitted(stored: Stored) -> Submitted:
    children = list(stored.children) if stored.children else None
    return Submitted(id=stored.id, name=stored.name, state=str(stored.state), children=children)


def submit_loaded(ctl: Controller, caller: UserRecord, loaded: LoadedJob) -> Stored:
    """One submission that is an array, stored in one transaction."""
    stored = ctl.store.arrays.submit_all([entry_for(ctl, caller, loaded)])
    ctl.wake()
    return stored[0]


def _check_one(ctl: Controller, caller: UserRecord, doc: object) -> NewJob | NewArray:
    loaded = parse_job(doc)
    if not ctl.store.tenants.exists(loaded.spec.tenant):
        raise SpecError([FieldError("tenant", f"there is no tenant {loaded.spec.tenant!r}")])
    try:
        authorize_submit(caller, loaded.spec.tenant)
    except Forbidden as e:
        raise SpecError([FieldError("tenant", str(e))]) from None
    return entry_for(ctl, caller, loaded)


def batch_docs(body: object) -> list[Any]:
    """The specs of a batch body `{jobs: [spec, ...]}` (InvalidInput if it is not one)."""
    docs = body.get(BATCH_KEY) if isinstance(body, dict) else None
    if not isinstance(docs, list) or not docs:
        why = "must be a non-empty list of job specs, like {jobs: [{name: ..., taskRoles: ...}]}"
        raise InvalidInput("the batch cannot be read", [(BATCH_KEY, why)])
    if len(docs) > MAX_BATCH_JOBS:
        why = f"has {len(docs)} specs; at most {MAX_BATCH_JOBS} in one batch"
        raise InvalidInput("the batch is too large", [(BATCH_KEY, why)])
    extra = [k for k in body if k != BATCH_KEY] if isinstance(body, dict) else []
    if extra:
        raise InvalidInput("the batch cannot be read", [(str(extra[0]), "unknown field")])
    return docs


def submit_batch(ctl: Controller, caller: UserRecord, docs: Sequence[object]) -> list[Stored]:
    """Check every spec (every error of every spec at `jobs[i].<path>`), then store them
    all in one transaction, or none."""
    entries: list[NewJob | NewArray] = []
    errors: list[tuple[str, str]] = []
    for i, doc in enumerate(docs):
        try:
            entries.append(_check_one(ctl, caller, doc))
        except SpecError as e:
            errors.extend(
                (join(item(BATCH_KEY, i), err.path).rstrip("."), err.message) for err in e.errors
            )
    total = sum(len(e.children) if isinstance(e, NewArray) else 1 for e in entries)
    if total > MAX_BATCH_CHILDREN:
        errors.append((BATCH_KEY, f"makes {total} jobs; at most {MAX_BATCH_CHILDREN}"))
    if errors:
        n = len(errors)
        raise InvalidInput(f"the batch has {n} error{'s' if n != 1 else ''}", errors)
    stored = ctl.store.arrays.submit_all(entries)
    ctl.wake()
    return stored
