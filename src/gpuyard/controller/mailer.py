"""Job e-mails: when a job ends, its owner is mailed through the configured SMTP relay if they
asked to be (`failure`: the job FAILED; `end`: it SUCCEEDED, FAILED or STOPPED).

The controller only enqueues the ended job (`job_ended`, no I/O); the same kind of background
worker as webhooks (`retryqueue.RetryQueue`) reads the owner's address and wishes and the
relay's settings at each send (so a change applies to the mails still queued), and sends
with a timeout; a failed send (connection, STARTTLS, login, a refused recipient) is tried
again with backoff, at most `max_attempts` times. Nothing is sent while no relay is set.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from dataclasses import asdict, dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any

from gpuyard.controller.retryqueue import Retry, RetryQueue
from gpuyard.controller.webhooks import job_payload
from gpuyard.metrics import Instruments
from gpuyard.store import JobRecord, MailSettings, NotifyPrefs, NotifyRepo, NotifyWhen

log = logging.getLogger("gpuyard.mail")

ENDED = ("SUCCEEDED", "FAILED", "STOPPED")
MAIL_RETRY = Retry(max_queue=1000, max_attempts=5, backoff_s=2.0, max_backoff_s=300.0)


@dataclass(frozen=True, slots=True)
class JobMail:
    """An ended job, as a webhook receives it (`webhooks.job_payload`)."""

    job: dict[str, Any]


def wanted(prefs: NotifyPrefs, state: str) -> bool:
    """Whether a user with these wishes is mailed about a job that ended in `state`."""
    if not prefs.email or state not in ENDED:
        return False
    if prefs.notify is NotifyWhen.END:
        return True
    return prefs.notify is NotifyWhen.FAILURE and state == "FAILED"


def compose(sender: str, to: str, job: dict[str, Any]) -> EmailMessage:
    """The mail: the job's state in the subject; its reason, message and times in the body."""
    msg = EmailMessage()
    msg["From"], msg["To"] = sender, to
    msg["Subject"] = f"[gpuyard] job {job['name']} ({job['id']}) {job['state']}"
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = make_msgid(domain="gpuyard")
    lines = [
        f"Job {job['name']} ({job['id']}) of tenant {job['tenant']} ended {job['state']}.",
        "",
        f"reason:    {job.get('reason') or '-'}",
        f"attempt:   {job.get('attempt')}",
        f"submitted: {job.get('submittedAt') or '-'}",
        f"started:   {job.get('startedAt') or '-'}",
        f"finished:  {job.get('finishedAt') or '-'}",
    ]
    if job.get("message"):
        lines += ["", str(job["message"])]
    lines += ["", f"gpuyard show {job['id']}; gpuyard logs {job['id']}"]
    msg.set_content("\n".join(lines) + "\n")
    return msg


def send(settings: MailSettings, msg: EmailMessage, timeout_s: float) -> None:
    """One SMTP session: connect, STARTTLS if set (certificate checked), log in if set, send."""
    assert settings.host is not None
    with smtplib.SMTP(settings.host, settings.port, timeout=timeout_s) as smtp:
        if settings.starttls:
            smtp.starttls(context=ssl.create_default_context())
        if settings.username:
            smtp.login(settings.username, settings.password or "")
        smtp.send_message(msg)


class MailDispatcher(RetryQueue[JobMail]):
    thread_name = "gpuyard-mail"

    def __init__(
        self,
        notify: NotifyRepo,
        instruments: Instruments,
        retry: Retry = MAIL_RETRY,
        timeout_s: float = 10.0,
    ) -> None:
        super().__init__(**asdict(retry))
        self._notify = notify
        self._metrics = instruments
        self._timeout_s = timeout_s

    def job_ended(self, job: JobRecord) -> None:
        """Queue a mail about `job` for its owner (whether one is sent is decided later)."""
        if job.owner:
            self.put(JobMail(job_payload(job)))

    def _attempt(self, _connection: Any, mail: JobMail) -> str | None:
        prefs = self._notify.prefs(mail.job["owner"])
        if not wanted(prefs, mail.job["state"]):
            return None
        settings = self._notify.mail_settings()
        if not settings.usable:
            log.info("no SMTP relay set: not mailing %s about job %s", prefs.user, mail.job["id"])
            return None
        assert prefs.email is not None and settings.sender is not None
        try:
            send(settings, compose(settings.sender, prefs.email, mail.job), self._timeout_s)
        except (smtplib.SMTPException, OSError) as e:  # OSError: refused, timeout, TLS
            return f"{type(e).__name__}: {e}"
        self._metrics.mail_deliveries.labels("sent").inc()
        return None

    def _dropped(self, mail: JobMail) -> None:
        self._metrics.mail_deliveries.labels("dropped").inc()
        log.warning("mail queue full: dropped the mail about job %s", mail.job["id"])

    def _retrying(self, mail: JobMail, attempt: int, problem: str, delay: float) -> None:
        log.info("mail about job %s: try %d failed (%s), again in %.1fs", mail.job["id"],
                 attempt, problem, delay)  # fmt: skip

    def _gave_up(self, mail: JobMail, attempts: int, problem: str) -> None:
        self._metrics.mail_deliveries.labels("failed").inc()
        log.warning("mail about job %s failed %d times, giving up: %s", mail.job["id"],
                    attempts, problem)  # fmt: skip
