"""Idle GPUs: a running job whose GPUs all stay under its tenant's utilisation threshold for
its tenant's window is idle; the controller then flags it (an `IdleGPU` event and the
`gpuyard_job_idle_gpu` metric) or stops it (reason `IdleGPU`, never retried).

Utilisation comes from an injected reader (in the server: every node's own NVML readings,
`gpureadings.GpuReadings.utilization`). A GPU without a fresh reading (fake, or its node not
answering) makes its job ineligible: fake GPUs are never flagged. The window is watched in
memory: after a restart it starts again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpuyard.model import GpuDevice, IdleGpuAction, Tenant
from gpuyard.store import JobRecord, TaskRecord

UtilizationReader = Callable[[GpuDevice], float | None]
JobKey = tuple[str, int]  # job id, attempt


@dataclass(frozen=True, slots=True)
class IdleFinding:
    job_id: str
    tenant: str
    action: IdleGpuAction
    message: str


class IdleWatch:
    """Remembers since when each running job's GPUs have been idle."""

    def __init__(self, reader: UtilizationReader) -> None:
        self._reader = reader
        self._since: dict[JobKey, float] = {}
        self._idle: dict[JobKey, str] = {}  # past the window: job → tenant

    def idle_jobs(self) -> dict[str, str]:
        """Job id → tenant of every job idle past its window now."""
        return {job_id: tenant for (job_id, _), tenant in dict(self._idle).items()}

    def check(
        self,
        running: Sequence[tuple[JobRecord, Sequence[TaskRecord]]],
        tenants: Mapping[str, Tenant],
        gpus: Mapping[tuple[str, int], GpuDevice],
        now: float,
    ) -> list[IdleFinding]:
        """The jobs that went past their idle window in this check (each once per episode)."""
        watched = {(job.id, job.attempt) for job, _ in running}
        self._forget(lambda key: key not in watched)
        found = []
        for job, tasks in running:
            finding = self._check_job(job, tasks, tenants.get(job.tenant), gpus, now)
            if finding is not None:
                found.append(finding)
        return found

    def _check_job(
        self,
        job: JobRecord,
        tasks: Sequence[TaskRecord],
        tenant: Tenant | None,
        gpus: Mapping[tuple[str, int], GpuDevice],
        now: float,
    ) -> IdleFinding | None:
        key = (job.id, job.attempt)
        if tenant is None or tenant.idle_gpu_action is IdleGpuAction.OFF:
            self._forget(lambda k: k == key)
            return None
        peak = self._peak_utilization(tasks, gpus)
        if peak is None or peak >= tenant.idle_gpu_threshold_pct:
            self._forget(lambda k: k == key)
            return None
        since = self._since.setdefault(key, now)
        if now - since < tenant.idle_gpu_window_s or key in self._idle:
            return None
        self._idle[key] = job.tenant
        message = (
            f"every GPU of the job stayed under {tenant.idle_gpu_threshold_pct:g}% utilisation"
            f" for {now - since:.0f}s (tenant {tenant.name}: idleGpuWindowS"
            f" {tenant.idle_gpu_window_s}, action {tenant.idle_gpu_action})"
        )
        return IdleFinding(job.id, job.tenant, tenant.idle_gpu_action, message)

    def _peak_utilization(
        self, tasks: Sequence[TaskRecord], gpus: Mapping[tuple[str, int], GpuDevice]
    ) -> float | None:
        """The highest utilisation of the job's GPUs; None if it has none or one is unknown."""
        devices = [gpus.get((t.node, i)) for t in tasks for i in t.gpus]
        if not devices or any(d is None for d in devices):
            return None
        readings = [self._reader(d) for d in devices if d is not None]
        if any(r is None for r in readings):
            return None
        return max(r for r in readings if r is not None)

    def _forget(self, drop: Callable[[JobKey], bool]) -> None:
        for key in [k for k in self._since if drop(k)]:
            del self._since[key]
        for key in [k for k in self._idle if drop(k)]:
            del self._idle[key]
