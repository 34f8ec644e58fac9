"""Bodies of e-mail notifications: a user's address and wishes, and the SMTP relay's settings
(its password is written, never read back: `passwordSet` says whether there is one)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StrictBool, StrictInt

from gpuyard.api.schemas.common import Out
from gpuyard.store import NotifyWhen

#: one address, no display name, no white space (nothing that could start another header)
EMAIL_PATTERN = r"^[^@\s<>,;:\"()\[\]\\]{1,64}@[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$"
HOST_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9.:-]{0,251}[A-Za-z0-9])?$"

Email = Annotated[str, Field(pattern=EMAIL_PATTERN, max_length=254)]


class In(Out):
    model_config = ConfigDict(extra="forbid")


class NotifyIn(In):
    """`email: null` forgets the address (and so stops the mails)."""

    email: Email | None = None
    notify: NotifyWhen = NotifyWhen.OFF


class NotifyOut(Out):
    user: str
    email: str | None
    notify: NotifyWhen


class MailSettingsIn(In):
    """The relay, all fields given each time; `password` left out keeps the one set, null
    removes it."""

    host: Annotated[str, Field(pattern=HOST_PATTERN, max_length=253)]
    port: Annotated[StrictInt, Field(ge=1, le=65535)] = 587
    sender: Email
    starttls: StrictBool = True
    username: Annotated[str | None, Field(min_length=1, max_length=254)] = None
    password: Annotated[str | None, Field(max_length=1024)] = None


class MailSettingsOut(Out):
    host: str | None
    port: int
    sender: str | None
    starttls: bool
    username: str | None
    password_set: bool
    updated_at: str | None
    updated_by: str | None
