"""Who leads (docs/ha.md), from the lease row in the database: the same answer from every
server, with the answering server's own role."""

from __future__ import annotations

from gpuyard.api.schemas.leader import LeaderOut, LeadershipOut
from gpuyard.controller.leader import Leadership


def leadership_out(leadership: Leadership | None) -> LeadershipOut:
    """None: an app built without a lease (embedded in a test): it runs its own controller."""
    if leadership is None:
        return LeadershipOut(leader=None, server="embedded", role="leader", lease_ttl_s=None)
    info = leadership.current()
    leader = None
    if info is not None:
        leader = LeaderOut(
            id=info.holder,
            address=info.address,
            term=info.term,
            heartbeat_age_s=round(max(0.0, info.age_s), 3),
        )
    return LeadershipOut(
        leader=leader,
        server=leadership.lease.holder,
        role="leader" if leadership.leading else "follower",
        lease_ttl_s=getattr(leadership.lease, "ttl_s", None),
    )
