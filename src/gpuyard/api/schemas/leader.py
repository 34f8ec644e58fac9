"""GET /api/v1/leader: which server leads (runs the controller), its term, and what the
answering server is (docs/ha.md)."""

from __future__ import annotations

from gpuyard.api.schemas.common import Out


class LeaderOut(Out):
    id: str  # host:port:pid of the leading server
    address: str  # its API's URL
    term: int  # elections so far; +1 at each takeover
    heartbeat_age_s: float  # since its last heartbeat, by the database's clock


class LeadershipOut(Out):
    leader: LeaderOut | None  # None: no server has led yet
    server: str  # the answering server's id
    role: str  # leader | follower
    lease_ttl_s: float | None  # PostgreSQL: how long a silent leader may still act
