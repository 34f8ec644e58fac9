"""Persistence: jobs, tasks, events and nodes in SQLite (embedded) or PostgreSQL (by URL)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from gpuyard.model import Clock, SystemClock
from gpuyard.store.db import make_engine, migrate, session_factory, sqlite_url
from gpuyard.store.jobs import JobAlreadyEnded, JobNotFound, JobRepo, NewJob, NewTask, task_key
from gpuyard.store.nodes import NodeRepo
from gpuyard.store.records import EventRecord, JobRecord, TaskRecord


@dataclass
class Store:
    engine: Engine
    jobs: JobRepo
    nodes: NodeRepo

    def close(self) -> None:
        self.engine.dispose()


def open_store(
    data_dir: Path | None = None, url: str | None = None, clock: Clock | None = None
) -> Store:
    """Open (and migrate) the store: `url` if given, else SQLite under `data_dir`."""
    if url is None:
        if data_dir is None:
            raise ValueError("open_store needs a data_dir or a url")
        data_dir.mkdir(parents=True, exist_ok=True)
        url = sqlite_url(data_dir)
    engine = make_engine(url)
    migrate(engine)
    sessions = session_factory(engine)
    clk = clock or SystemClock()
    return Store(engine, JobRepo(sessions, clk), NodeRepo(sessions, clk))


__all__ = [
    "EventRecord",
    "JobAlreadyEnded",
    "JobNotFound",
    "JobRecord",
    "JobRepo",
    "NewJob",
    "NewTask",
    "NodeRepo",
    "Store",
    "TaskRecord",
    "open_store",
    "task_key",
]
