"""Schemathesis against the real app (issue 15, item 8): generated requests to every operation
of the OpenAPI document, as the platform admin, answer no 5xx, and every answer conforms to
the document (status code, content type, headers, body schema).

The app is `create_app` on a real store and the real controller over the fake engine (tests/api's
world; no container starts: the controller's loop is not running). The run is short and
bounded: `EXAMPLES` per operation, no deadline, no example database.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from api.conftest import build_world

EXAMPLES = 20  # per operation (~100 operations: ~2,000 requests; each 10 more cost CI ~20 s)

_DIR = Path(tempfile.mkdtemp(prefix="gpuyard-schemathesis-"))
_WORLDS = build_world(_DIR)
WORLD = next(_WORLDS)  # the schema is read at collection, from the app itself
schema = schemathesis.openapi.from_asgi("/openapi.json", WORLD.client.app)


@pytest.fixture(scope="module", autouse=True)
def _close_world() -> Iterator[None]:
    yield
    next(_WORLDS, None)  # the world's own teardown: client, store
    shutil.rmtree(_DIR, ignore_errors=True)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_every_operation_answers_within_its_schema(case) -> None:
    """Every check but `positive_data_acceptance`: a body the schema allows may still be
    refused (422) by rules a schema cannot say (a job spec, a tenant that must exist)."""
    case.call_and_validate(
        headers=WORLD.headers("root"), excluded_checks=[positive_data_acceptance]
    )
