"""E-mail notifications behind the API: users' wishes and the relay's settings, to and from
the store (`store/notify.py`); the password is kept or replaced, never returned."""

from __future__ import annotations

from gpuyard.api.schemas.common import iso
from gpuyard.api.schemas.notify import MailSettingsIn, MailSettingsOut, NotifyIn, NotifyOut
from gpuyard.controller import Controller
from gpuyard.store import MailSettings, NotifyPrefs, UserNotFound


def existing_user(ctl: Controller, name: str) -> str:
    """`name`, if such a user exists (404 otherwise)."""
    if ctl.store.users.get(name) is None:
        raise UserNotFound(f"no user {name}")
    return name


def prefs_out(prefs: NotifyPrefs) -> NotifyOut:
    return NotifyOut(user=prefs.user, email=prefs.email, notify=prefs.notify)


def set_prefs(ctl: Controller, user: str, body: NotifyIn) -> NotifyOut:
    return prefs_out(ctl.store.notify.set_prefs(NotifyPrefs(user, body.email, body.notify)))


def settings_out(s: MailSettings) -> MailSettingsOut:
    return MailSettingsOut(
        host=s.host, port=s.port, sender=s.sender, starttls=s.starttls, username=s.username,
        password_set=s.password is not None, updated_at=iso(s.updated_at),
        updated_by=s.updated_by,
    )  # fmt: skip


def set_settings(ctl: Controller, body: MailSettingsIn, by: str) -> MailSettingsOut:
    """Store the relay; a `password` left out of the body keeps the one already set."""
    password = (
        body.password if "password" in body.model_fields_set
        else ctl.store.notify.mail_settings().password
    )  # fmt: skip
    settings = MailSettings(
        body.host, body.port, body.sender, body.starttls, body.username, password
    )
    return settings_out(ctl.store.notify.set_mail_settings(settings, by))
