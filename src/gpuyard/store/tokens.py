"""API tokens: `gy_` + 32 random bytes (URL-safe), stored only as their SHA-256 hash.

A token is shown once, when it is made. It is checked by hashing what the caller sends and
looking the hash up (a unique index); the stored and computed hashes are compared in constant
time. `last_used_at` is written at most once a minute per token, so reads stay reads.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock
from gpuyard.store.tables import TokenRow, UserRow

PREFIX = "gy_"
LAST_USED_RESOLUTION_S = 60.0


class TokenNotFound(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class TokenRecord:
    id: str
    user: str
    name: str
    created_at: float
    last_used_at: float | None
    expires_at: float | None
    revoked_at: float | None


@dataclass(frozen=True, slots=True)
class NewToken:
    """A token just made: `secret` is the only copy of the token there will ever be."""

    record: TokenRecord
    secret: str


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenRepo:
    def __init__(self, sessions: sessionmaker[Session], clock: Clock) -> None:
        self._sessions = sessions
        self._clock = clock

    def create(self, user: str, name: str, expires_at: float | None = None) -> NewToken:
        secret = PREFIX + secrets.token_urlsafe(32)
        with self._sessions.begin() as s:
            if s.get(UserRow, user) is None:
                raise LookupError(f"no user {user}")
            row = TokenRow(
                id=secrets.token_hex(6),
                user=user,
                token_hash=hash_token(secret),
                name=name,
                created_at=self._clock.now(),
                expires_at=expires_at,
            )
            s.add(row)
            return NewToken(_record(row), secret)

    def check(self, secret: str) -> tuple[TokenRecord | None, str | None]:
        """(the token, None) if `secret` is a live token; (None, why not) otherwise."""
        if not secret.startswith(PREFIX):
            return None, "it is not a gpuyard token (they start with gy_)"
        digest = hash_token(secret)
        now = self._clock.now()
        with self._sessions() as s:  # read only: no write lock for every request
            row = s.scalar(select(TokenRow).where(TokenRow.token_hash == digest))
        if row is None or not hmac.compare_digest(row.token_hash, digest):
            return None, "the token is unknown"
        if row.revoked_at is not None:
            return None, "the token was revoked"
        if row.expires_at is not None and row.expires_at <= now:
            return None, "the token has expired"
        if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION_S:
            with self._sessions.begin() as s:  # at most once per resolution and token
                s.execute(update(TokenRow).where(TokenRow.id == row.id).values(last_used_at=now))
            row.last_used_at = now
        return _record(row), None

    def list(self, user: str) -> list[TokenRecord]:
        q = select(TokenRow).where(TokenRow.user == user).order_by(TokenRow.created_at)
        with self._sessions() as s:
            return [_record(r) for r in s.scalars(q)]

    def revoke(self, user: str, token_id: str) -> TokenRecord:
        with self._sessions.begin() as s:
            row = s.get(TokenRow, token_id)
            if row is None or row.user != user:
                raise TokenNotFound(f"user {user} has no token {token_id}")
            if row.revoked_at is None:
                row.revoked_at = self._clock.now()
            return _record(row)


def _record(r: TokenRow) -> TokenRecord:
    return TokenRecord(
        r.id, r.user, r.name, r.created_at, r.last_used_at, r.expires_at, r.revoked_at
    )
