"""E-mail notifications on the real app and controller, mailed through a real SMTP server
(aiosmtpd on a free port) that receives them in the test: a user's address and wishes
(failure / end / off) set through the API, the relay set by a platform admin (its password
used to log in, never shown back), bad fields answered 422 at their path; a relay that never
answers does not slow the controller's cycle, and a relay that fails is retried up to the cap.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from aiosmtpd.controller import Controller as SmtpServer
from aiosmtpd.smtp import AuthResult, LoginPassword

from e2e.conftest import free_port
from gpuyard.controller.mailer import MailDispatcher
from gpuyard.controller.retryqueue import Retry
from gpuyard.metrics import Instruments
from gpuyard.store import MailSettings

PASSWORD = "relay-s3cret"


@dataclass
class Inbox:
    """What the SMTP server received: (envelope recipients, the message text), and logins."""

    mails: list[tuple[list[str], str]] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 - aiosmtpd's
        self.mails.append((list(envelope.rcpt_tos), envelope.content.decode()))
        return "250 OK"

    def authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        assert isinstance(auth_data, LoginPassword)
        self.logins.append((auth_data.login.decode(), auth_data.password.decode()))
        return AuthResult(success=auth_data.password.decode() == PASSWORD)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.mails) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.mails) >= count, self.mails


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    inbox = Inbox()
    port = free_port()
    server = SmtpServer(
        inbox, hostname="127.0.0.1", port=port, authenticator=inbox.authenticate,
        auth_require_tls=False,
    )  # fmt: skip
    server.start()
    yield inbox, port
    server.stop()


@pytest.fixture
def mailing(world, smtp):
    """The world with a relay set (plain SMTP, a login) and the controller's mailer running."""
    inbox, port = smtp
    relay = {"host": "127.0.0.1", "port": port, "sender": "gpuyard@example.com",
             "starttls": False, "username": "relay", "password": PASSWORD}  # fmt: skip
    r = world.call("root", "PUT", "/api/v1/settings/mail", json=relay)
    assert r.status_code == 200, r.text
    world.ctl.mailer.start()
    world.inbox = inbox
    yield world
    world.ctl.mailer.stop()


def _notify(world, who: str, email: str | None, notify: str, as_: str | None = None):
    body = {"email": email, "notify": notify}
    return world.call(as_ or who, "PUT", f"/api/v1/users/{who}/notifications", json=body)


def _end(world, tenant: str, code: int) -> None:
    [key] = world.engine.keys_on(world.jobs[tenant])
    world.engine.exit(key, code, "Completed" if code == 0 else f"Error(exit {code})")
    world.ctl.run_cycle()


def test_a_failed_job_mails_its_owner_through_the_relay(mailing):
    assert _notify(mailing, "alice", "alice@example.com", "failure").status_code == 200
    _end(mailing, "red", 3)
    assert mailing.store.jobs.get(mailing.jobs["red"]).state == "FAILED"
    mailing.inbox.wait_for(1)
    [(to, text)] = mailing.inbox.mails
    assert to == ["alice@example.com"]
    assert f"Subject: [gpuyard] job red-job ({mailing.jobs['red']}) FAILED" in text
    assert "From: gpuyard@example.com" in text and "reason:    Error(exit 3)" in text
    assert mailing.inbox.logins == [("relay", PASSWORD)]


def test_failure_only_is_not_mailed_a_success_and_end_is(mailing):
    _notify(mailing, "alice", "alice@example.com", "failure")
    _notify(mailing, "bob", "bob@example.com", "end")
    _end(mailing, "red", 0)
    _end(mailing, "blue", 0)
    mailing.inbox.wait_for(1)
    time.sleep(0.3)  # alice's would have come by now
    assert [to for to, _ in mailing.inbox.mails] == [["bob@example.com"]]
    assert "SUCCEEDED" in mailing.inbox.mails[0][1]


def test_off_and_no_address_mail_nothing(mailing):
    _notify(mailing, "alice", "alice@example.com", "off")
    _end(mailing, "red", 1)
    _end(mailing, "blue", 1)  # bob never set an address
    time.sleep(0.5)
    assert mailing.inbox.mails == []


def test_who_may_read_and_set_a_users_notifications(world):
    assert _notify(world, "alice", "a@example.com", "end").status_code == 200
    assert _notify(world, "alice", "x@example.com", "end", as_="bob").status_code == 403
    assert _notify(world, "alice", "y@example.com", "end", as_="root").status_code == 200
    got = world.call("alice", "GET", "/api/v1/users/alice/notifications").json()
    assert got == {"user": "alice", "email": "y@example.com", "notify": "end"}
    assert world.call("bob", "GET", "/api/v1/users/alice/notifications").status_code == 403
    assert world.call("root", "GET", "/api/v1/users/ghost/notifications").status_code == 404


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"email": "alice@example.com\r\nBcc: eve@example.com", "notify": "end"}, "body.email"),
        ({"email": "Alice <alice@example.com>", "notify": "end"}, "body.email"),
        ({"email": "alice@example.com", "notify": "sometimes"}, "body.notify"),
        ({"email": "alice@example.com", "notify": "end", "cc": "x"}, "body.cc"),
    ],
)
def test_bad_notification_fields_answer_422_at_their_path(world, body, path):
    r = world.call("alice", "PUT", "/api/v1/users/alice/notifications", json=body)
    assert r.status_code == 422, r.text
    assert path in [e["path"] for e in r.json()["errors"]]


def test_the_relay_password_is_never_shown_back(world):
    relay = {"host": "smtp.example.com", "port": 587, "sender": "yard@example.com",
             "username": "relay", "password": PASSWORD}  # fmt: skip
    r = world.call("root", "PUT", "/api/v1/settings/mail", json=relay)
    assert r.status_code == 200 and PASSWORD not in r.text
    assert r.json()["passwordSet"] is True and r.json()["updatedBy"] == "root"
    r = world.call("root", "PUT", "/api/v1/settings/mail", json={**relay, "password": None})
    assert r.json()["passwordSet"] is False
    world.call("root", "PUT", "/api/v1/settings/mail", json=relay)
    kept = {k: v for k, v in relay.items() if k != "password"} | {"port": 2525}
    r = world.call("root", "PUT", "/api/v1/settings/mail", json=kept)
    assert (
        r.json()["passwordSet"] is True and world.store.notify.mail_settings().password == PASSWORD
    )
    got = world.call("root", "GET", "/api/v1/settings/mail")
    assert got.status_code == 200 and PASSWORD not in got.text and got.json()["port"] == 2525
    for who in ("alice", "redboss"):
        assert world.call(who, "GET", "/api/v1/settings/mail").status_code == 403
        assert world.call(who, "PUT", "/api/v1/settings/mail", json=relay).status_code == 403


@pytest.mark.parametrize(
    ("change", "path"),
    [({"port": 70000}, "body.port"), ({"port": True}, "body.port"),
     ({"host": "a b"}, "body.host"), ({"sender": "nobody"}, "body.sender")],
)  # fmt: skip
def test_bad_relay_fields_answer_422_at_their_path(world, change, path):
    relay = {"host": "smtp.example.com", "sender": "yard@example.com"} | change
    r = world.call("root", "PUT", "/api/v1/settings/mail", json=relay)
    assert r.status_code == 422, r.text
    assert [e["path"] for e in r.json()["errors"]] == [path]


def test_a_relay_that_never_answers_does_not_slow_the_cycle(world):
    silent = socket.socket()  # listens, never accepts: the SMTP greeting never comes
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    relay = {"host": "127.0.0.1", "port": silent.getsockname()[1], "sender": "y@example.com",
             "starttls": False}  # fmt: skip
    world.call("root", "PUT", "/api/v1/settings/mail", json=relay)
    _notify(world, "alice", "alice@example.com", "end")
    _notify(world, "bob", "bob@example.com", "end")
    world.ctl.mailer.start()
    try:
        began = time.monotonic()
        _end(world, "red", 0)
        _end(world, "blue", 0)
        assert time.monotonic() - began < 2.0  # the mailer's timeout is 10 s a try
    finally:
        world.ctl.mailer.stop(timeout_s=0.1)
        silent.close()


def test_a_failing_relay_is_retried_up_to_the_cap(world, smtp):
    inbox, port = smtp
    # STARTTLS asked of a relay that does not offer it: every try fails
    world.store.notify.set_mail_settings(
        MailSettings("127.0.0.1", port, "y@example.com", True, None, None), "root"
    )
    _notify(world, "alice", "alice@example.com", "end")
    _end(world, "red", 0)  # the controller's own mailer is not started: it sends nothing
    instruments = Instruments()
    mailer = MailDispatcher(world.store.notify, instruments, Retry(max_attempts=3, backoff_s=0.01))
    mailer.start()
    try:
        mailer.job_ended(world.store.jobs.get(world.jobs["red"]))
        failed = instruments.mail_deliveries.labels("failed")
        deadline = time.monotonic() + 10
        while failed._value.get() < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert failed._value.get() == 1 and len(mailer) == 0
        assert inbox.mails == []
    finally:
        mailer.stop()
