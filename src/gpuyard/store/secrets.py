"""Secret values at rest: a job spec's `{secret: ...}` values are stored encrypted.

A spec document marks a secret value `{"secret": "hf_..."}` (secret env values; OpenPAI
commands that hold a `$secrets` value). The store writes each as `{"sealed": "<token>"}`, a
Fernet token (AES-128-CBC + HMAC-SHA256) under the key in `<data dir>/secrets.key` (made 0600
on first start, never logged), and turns it back when it reads the job: the database and its
backups hold no secret in clear. Who may *see* a secret is the API's business (it redacts).

Only a dict that is exactly `{"secret": <text>}` is sealed, and only one that is exactly
`{"sealed": <text>}` unsealed: nothing else in a spec has that shape (the spec refuses any
other mapping where a value goes). A token that does not open with this key (the key file was
replaced) reads as `UNREADABLE`, logged, never an exception in every reader.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

log = logging.getLogger("gpuyard.store")

KEY_FILE = "secrets.key"
SECRET = "secret"
SEALED = "sealed"
UNREADABLE = "<unreadable: sealed with another secrets.key>"


def map_marked(doc: Any, key: str, change: Callable[[str], str], into: str) -> Any:
    """`doc` with each `{key: text}` dict replaced by `{into: change(text)}`, recursively."""
    if isinstance(doc, dict):
        if len(doc) == 1 and isinstance(doc.get(key), str):
            return {into: change(doc[key])}
        return {k: map_marked(v, key, change, into) for k, v in doc.items()}
    if isinstance(doc, list):
        return [map_marked(v, key, change, into) for v in doc]
    return doc


def load_key(data_dir: Path) -> bytes:
    """The key in `data_dir/secrets.key`, made (0600, exclusively) if there is none."""
    path = data_dir / KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
            log.warning("%s was readable by others: made 0600", path)
        return path.read_bytes().strip()
    key = Fernet.generate_key()
    with os.fdopen(fd, "wb") as f:
        f.write(key + b"\n")
        f.flush()
        os.fsync(f.fileno())
    log.info("made the key of stored secrets: %s", path)
    return key


class SecretBox:
    """Seals and unseals the secret values of JSON documents with one Fernet key."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)
        self._key = key
        self._opened: dict[str, str] = {}  # token → text: a job's spec is read often

    @classmethod
    def at(cls, data_dir: Path | None) -> SecretBox:
        """The box of `data_dir`'s key; without a data dir, a key that lives in memory only
        (a store opened by URL alone: its secrets do not outlive the process)."""
        return cls(load_key(data_dir) if data_dir is not None else Fernet.generate_key())

    def derive(self, label: str) -> bytes:
        """32 bytes for `label` from this key (HMAC-SHA256): the same for one key and label on
        every call and server, unrelated across labels (a job's ssh keys: controller/sshkeys.py)."""
        return hmac.new(self._key, label.encode(), hashlib.sha256).digest()

    def seal(self, doc: Any) -> Any:
        return map_marked(doc, SECRET, self._encrypt, SEALED)

    def unseal(self, doc: Any) -> Any:
        return map_marked(doc, SEALED, self._decrypt, SECRET)

    @staticmethod
    def holds_sealed(text: str) -> bool:
        """Whether a stored document (JSON text) may hold sealed values (a quick look)."""
        return f'"{SEALED}"' in text

    def _encrypt(self, text: str) -> str:
        return self._fernet.encrypt(text.encode()).decode("ascii")

    def _decrypt(self, token: str) -> str:
        if (text := self._opened.get(token)) is not None:
            return text
        try:
            text = self._fernet.decrypt(token.encode("ascii")).decode()
        except (InvalidToken, UnicodeError):
            log.error("a stored secret does not open with this secrets.key")
            return UNREADABLE
        if len(self._opened) > 10_000:
            self._opened.clear()
        self._opened[token] = text
        return text
