"""E-mail notifications: each user's address and when to mail them about their jobs, and the
SMTP relay the server sends through (one row; its password sealed with the store's secrets
key, like a spec's secret values, and never read back by the API)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from gpuyard.model import Clock
from gpuyard.store.secrets import SEALED, SECRET, SecretBox
from gpuyard.store.tables import MailSettingsRow, UserNotifyRow

SETTINGS_ID = 1


class NotifyWhen(enum.StrEnum):
    FAILURE = "failure"  # a job of theirs FAILED
    END = "end"  # a job of theirs ended: SUCCEEDED, FAILED or STOPPED
    OFF = "off"


@dataclass(frozen=True, slots=True)
class NotifyPrefs:
    user: str
    email: str | None = None
    notify: NotifyWhen = NotifyWhen.OFF


@dataclass(frozen=True, slots=True)
class MailSettings:
    host: str | None
    port: int
    sender: str | None
    starttls: bool
    username: str | None
    password: str | None  # in clear: for the mailer only, never for an answer
    updated_at: float | None = None
    updated_by: str | None = None

    @property
    def usable(self) -> bool:
        return bool(self.host and self.sender)


NO_RELAY = MailSettings(None, 587, None, True, None, None)


class NotifyRepo:
    def __init__(self, sessions: sessionmaker[Session], clock: Clock, secrets: SecretBox) -> None:
        self._sessions = sessions
        self._clock = clock
        self._secrets = secrets

    def prefs(self, user: str) -> NotifyPrefs:
        with self._sessions() as s:
            row = s.get(UserNotifyRow, user)
            if row is None:
                return NotifyPrefs(user)
            return NotifyPrefs(user, row.email, NotifyWhen(row.notify))

    def set_prefs(self, prefs: NotifyPrefs) -> NotifyPrefs:
        with self._sessions.begin() as s:
            s.merge(UserNotifyRow(user=prefs.user, email=prefs.email, notify=str(prefs.notify)))
        return prefs

    def mail_settings(self) -> MailSettings:
        """The relay (its password opened), or `NO_RELAY` when none was set."""
        with self._sessions() as s:
            row = s.get(MailSettingsRow, SETTINGS_ID)
            if row is None:
                return NO_RELAY
            return MailSettings(
                row.host, row.port, row.sender, row.starttls, row.username,
                self._open(row.password_sealed), row.updated_at, row.updated_by,
            )  # fmt: skip

    def set_mail_settings(self, settings: MailSettings, by: str) -> MailSettings:
        row = MailSettingsRow(
            id=SETTINGS_ID, host=settings.host, port=settings.port, sender=settings.sender,
            starttls=settings.starttls, username=settings.username,
            password_sealed=self._seal(settings.password), updated_at=self._clock.now(),
            updated_by=by,
        )  # fmt: skip
        with self._sessions.begin() as s:
            s.merge(row)
        return self.mail_settings()

    def _seal(self, password: str | None) -> str | None:
        return None if password is None else self._secrets.seal({SECRET: password})[SEALED]

    def _open(self, sealed: str | None) -> str | None:
        return None if sealed is None else self._secrets.unseal({SEALED: sealed})[SECRET]
