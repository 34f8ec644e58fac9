"""Security tests run against the real `gpuyard up` (tests/e2e's `Server`, reused), real
hostile processes, and the real API in-process (`apiworld`: create_app on the fake engine)."""

from e2e.conftest import make_server, server  # noqa: F401 - fixtures
from security.apiworld import shared_world, world  # noqa: F401 - fixtures: the API in-process
