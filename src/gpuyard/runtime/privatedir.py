"""Dirs only the server's uid may enter: the data dir and each node's state root (mode 0700,
whatever the umask). They hold the database, every task's `launch.json` / `task.json` /
`config.json` (the job's env, secrets included) and every log."""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_DIR = 0o700


def private_dir(path: Path) -> int | None:
    """Make `path` (and missing parents) a dir of mode 0700; the mode it had if that was
    looser and it was tightened, else None."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode == PRIVATE_DIR:
        return None
    os.chmod(path, PRIVATE_DIR)
    return mode
