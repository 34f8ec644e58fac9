"""E-mail notifications: a user's address and when to mail them about their jobs (the user
themselves or a platform admin), and the SMTP relay (platform admins; its password is
written, never shown back). Sending is the controller's (`controller/mailer.py`)."""

from __future__ import annotations

from fastapi import APIRouter

from gpuyard.api.auth import CallerDep
from gpuyard.api.authz import authorize_platform_admin, authorize_self_or_admin
from gpuyard.api.deps import ControllerDep
from gpuyard.api.schemas import error_responses
from gpuyard.api.schemas.notify import MailSettingsIn, MailSettingsOut, NotifyIn, NotifyOut
from gpuyard.api.services import notify as svc

router = APIRouter(
    prefix="/api/v1", tags=["notifications"], responses=error_responses(401, 403, 404, 422)
)


@router.get("/users/{name}/notifications", response_model=NotifyOut)
def get_notifications(name: str, ctl: ControllerDep, caller: CallerDep) -> NotifyOut:
    """A user's address and wishes: `failure`, `end` or `off`."""
    authorize_self_or_admin(caller, name, "read the notifications")
    return svc.prefs_out(ctl.store.notify.prefs(svc.existing_user(ctl, name)))


@router.put("/users/{name}/notifications", response_model=NotifyOut)
def put_notifications(
    name: str, body: NotifyIn, ctl: ControllerDep, caller: CallerDep
) -> NotifyOut:
    """Mail the user when a job of theirs fails (`failure`), ends (`end`), or never (`off`)."""
    authorize_self_or_admin(caller, name, "change the notifications")
    return svc.set_prefs(ctl, svc.existing_user(ctl, name), body)


@router.get("/settings/mail", response_model=MailSettingsOut)
def get_mail_settings(ctl: ControllerDep, caller: CallerDep) -> MailSettingsOut:
    """The SMTP relay (platform admin): never its password, only whether one is set."""
    authorize_platform_admin(caller, "read the mail settings")
    return svc.settings_out(ctl.store.notify.mail_settings())


@router.put("/settings/mail", response_model=MailSettingsOut)
def put_mail_settings(
    body: MailSettingsIn, ctl: ControllerDep, caller: CallerDep
) -> MailSettingsOut:
    """Set the SMTP relay (platform admin); `password` left out keeps the one set."""
    authorize_platform_admin(caller, "change the mail settings")
    return svc.set_settings(ctl, body, caller.name)
