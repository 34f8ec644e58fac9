"""Operating the nodes: cordoned and draining nodes leave scheduling; overdue drains preempt.

An admin's cordon lives in the store (`NodeRepo.cordon`); every cycle the controller marks
those nodes `schedulable=False` in what it hands the scheduler (`with_cordons`), so no new task
lands there while the tasks already running go on. A draining node whose deadline has passed
has its running jobs preempted (`drain_preemptions`): each gets a `NodeDrained` event, then a
stop with its tenant's preemption grace, and is requeued without counting as a retry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from gpuyard.model import CordonState, Node, NodeCordon, Tenant
from gpuyard.store import JobRecord, TaskRecord

NODE_DRAINED = "NodeDrained"  # the event of a job preempted by a node's drain


def with_cordons(nodes: Iterable[Node], cordons: Mapping[str, NodeCordon]) -> list[Node]:
    """The nodes as the scheduler must see them: cordoned and draining ones unschedulable."""
    return [replace(n, schedulable=False) if n.name in cordons else n for n in nodes]


def overdue_drains(cordons: Mapping[str, NodeCordon], now: float) -> set[str]:
    """The draining nodes whose deadline has passed."""
    return {
        name
        for name, c in cordons.items()
        if c.state is CordonState.DRAINING and c.deadline is not None and now >= c.deadline
    }


@dataclass(frozen=True, slots=True)
class DrainPreemption:
    job_id: str
    node: str
    grace_s: float
    message: str


def drain_preemptions(
    overdue: set[str],
    tasks: Sequence[TaskRecord],
    jobs: Mapping[str, JobRecord],
    tenants: Mapping[str, Tenant],
    default_grace_s: float,
) -> list[DrainPreemption]:
    """One preemption per running job with a task on an overdue draining node (jobs already
    being stopped are left to finish stopping)."""
    out: dict[str, DrainPreemption] = {}
    for t in tasks:
        job = jobs.get(t.job_id)
        if t.node not in overdue or job is None or job.stop_requested or job.id in out:
            continue
        tenant = tenants.get(job.tenant)
        grace = tenant.preemption_grace_s if tenant is not None else default_grace_s
        message = (
            f"node {t.node} is being drained and its deadline passed: the job is preempted "
            f"(grace {grace:g}s) and requeued on other nodes"
        )
        out[job.id] = DrainPreemption(job.id, t.node, grace, message)
    return list(out.values())
