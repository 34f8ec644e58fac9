"""The leader lease (controller/lease.py, leader.py; docs/ha.md) on a real PostgreSQL server:
two contenders and one wins; the winner's lock connection killed and the other takes over
only once the old lease ran out; the old leader's transactions refused (the fence); a
stalled leader's connection ended; a follower's wake-up reaching the leader. On SQLite: one
server per data dir, the holder's pid named."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from gpuyard.controller.leader import Leadership
from gpuyard.controller.lease import (
    DataDirInUse,
    Fence,
    Fenced,
    PgLease,
    SoloLease,
    lock_data_dir,
)
from gpuyard.metrics import Instruments
from gpuyard.model import Node
from gpuyard.store import Store
from gpuyard.upcmd import up_app

TTL = 0.8


@pytest.fixture
def url(store: Store, db_backend: str) -> str:
    if db_backend != "pg":
        pytest.skip("the lease of several servers is PostgreSQL's")
    return store.engine.url.render_as_string(hide_password=False)


def lease(url: str, name: str) -> PgLease:
    return PgLease(url, name, f"http://{name}:8080", ttl_s=TTL)


def end_connection_of(url: str, pid: int) -> None:
    admin = create_engine(url)
    with admin.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
    admin.dispose()


def until(check, timeout: float = 10.0, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(every)
    raise AssertionError(f"not within {timeout} s")


def a_write(store: Store) -> None:
    store.nodes.record([Node("n1", 4000, 8192)], "local")


def test_two_contenders_one_leads(url: str):
    a, b = lease(url, "a"), lease(url, "b")
    try:
        assert a.acquire() == 1
        assert b.acquire() is None
        assert a.renew() and a.holding() and not b.holding()
        info = b.current()
        assert info is not None and (info.holder, info.term) == ("a", 1)
        a.release()  # on purpose: the heartbeat zeroed, so b need not wait out the ttl
        assert b.acquire() == 2
    finally:
        a.release()
        b.release()


def test_lock_connection_killed_the_other_leads_and_the_old_is_fenced(url: str, store: Store):
    a, b = lease(url, "a"), lease(url, "b")
    fence = Fence(store.engine, a)
    try:
        assert a.acquire() == 1
        fence.mark()  # this thread acts for a: its transactions are fenced
        a_write(store)  # a leads: its writes go through
        info = a.current()
        assert info is not None and info.backend_pid is not None
        end_connection_of(url, info.backend_pid)  # a's lock is gone; a does not know yet
        lost_at = time.monotonic()
        term = until(b.acquire)  # b gets the lock at once, but waits out a's lease
        assert term == 2
        assert time.monotonic() - lost_at >= TTL * 0.5  # it waited for a's heartbeat to age
        assert not a.renew() and not a.holding()  # a finds out at its next heartbeat
        with pytest.raises(Fenced):
            a_write(store)  # and had it missed that, its writes are refused
        assert b.holding()
    finally:
        a.release()
        b.release()


def test_a_stalled_leader_is_ended_and_replaced(url: str):
    a, b = lease(url, "a"), lease(url, "b")
    try:
        assert a.acquire() == 1  # and then a stalls: no heartbeat, its connection alive
        assert b.acquire() is None
        term = until(b.acquire)  # after ttl b ends a's lock connection, then takes over
        assert term == 2
        assert not a.holding() and not a.renew()
    finally:
        a.release()
        b.release()


def test_a_followers_wake_up_reaches_the_leader(url: str, store: Store):
    woken = threading.Event()
    a, b = lease(url, "a"), lease(url, "b")
    leader = Leadership(a, Fence(store.engine, a), Instruments(), on_lost=print, renew_s=0.2)
    follower = Leadership(
        b, Fence(store.engine, b), Instruments(), on_lost=print, wake_engine=store.engine
    )
    leader.on_wake = woken.set
    try:
        assert leader.try_lead() and not follower.try_lead()
        leader.start()
        follower.start()
        time.sleep(0.3)
        sent = time.monotonic()
        follower.wake_leader()
        assert woken.wait(5)
        print(f"follower's wake-up reached the leader in {(time.monotonic() - sent) * 1e3:.1f} ms")
        assert leader.acting() and not follower.acting()
    finally:
        follower.stop()
        leader.stop()
        follower.release()
        leader.release()


def test_sqlite_one_server_per_data_dir_naming_the_holder(tmp_path: Path, store: Store, db_backend):
    if db_backend != "sqlite":
        pytest.skip("SQLite's")
    first = SoloLease(lock_data_dir(tmp_path), store.engine, "one", "http://one")
    try:
        assert first.acquire() == 1 and first.holding()
        with pytest.raises(DataDirInUse, match=f"pid {os.getpid()}"):
            lock_data_dir(tmp_path)
    finally:
        first.release()
    os.close(lock_data_dir(tmp_path))  # once let go, the next server may start


def test_gpuyard_up_on_a_held_data_dir_exits_naming_the_holder(tmp_path: Path, db_backend):
    if db_backend != "sqlite":
        pytest.skip("SQLite's")
    held = lock_data_dir(tmp_path)  # as a first server would
    try:
        done = CliRunner().invoke(up_app, ["--port", "0", "--data-dir", str(tmp_path)])
    finally:
        os.close(held)
    assert done.exit_code == 1
    assert f"another gpuyard server (pid {os.getpid()})" in done.output, done.output
