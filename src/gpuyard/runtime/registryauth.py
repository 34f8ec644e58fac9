"""The auth file a pull hands to skopeo: a task's registry login, never on a command line.

A login's password must not be in skopeo's argv (`/proc/PID/cmdline` is world-readable), in
its environment (`/proc/PID/environ` is the server uid's, but logged by some tools), nor in any
log. So each pull writes an `auth.json` (`{"auths": {HOST: {"auth": base64(user:password)}}}`,
the containers-auth.json format) into a fresh dir of mode 0700, the file itself created 0600
and exclusively, gives skopeo its path (`--src-authfile`), and removes both when skopeo is done,
whatever happened.

A pull without a login gets an auth file too, with no entry: skopeo then reads no other file,
so a task never pulls with credentials the node's admin left in `$XDG_RUNTIME_DIR` or
`~/.docker` (they would let any tenant pull what only the admin may).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gpuyard.model.registries import RegistryLogin

AUTH_FILE = "auth.json"


def auth_document(login: RegistryLogin | None) -> dict[str, object]:
    """The containers-auth.json document of `login` (no entry without one)."""
    if login is None:
        return {"auths": {}}
    token = base64.b64encode(f"{login.username}:{login.password}".encode()).decode("ascii")
    return {"auths": {login.registry: {"auth": token}}}


@contextlib.contextmanager
def auth_file(login: RegistryLogin | None, under: Path) -> Iterator[Path]:
    """The path of a private auth file for `login`, in a new 0700 dir beneath `under`;
    both are gone when the block ends."""
    under.mkdir(parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix="auth-", dir=under))  # 0700, a name of its own
    try:
        path = private / AUTH_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(auth_document(login), f)
        yield path
    finally:
        shutil.rmtree(private, ignore_errors=True)
