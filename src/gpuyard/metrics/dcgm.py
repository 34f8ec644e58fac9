"""GPU readings under the names and labels of NVIDIA's dcgm-exporter, so that its dashboards
and alerts work unchanged: `DCGM_FI_DEV_GPU_UTIL` (%), `DCGM_FI_DEV_FB_USED` and
`DCGM_FI_DEV_FB_FREE` (MiB), `DCGM_FI_DEV_GPU_TEMP` (°C), `DCGM_FI_DEV_POWER_USAGE` (W), each
labelled `gpu`, `UUID`, `device`, `modelName`, `Hostname` like dcgm-exporter, plus gpuyard's
`node` (the node whose agent read it: the same as `Hostname`), `job` and `tenant` of the job
holding the GPU (absent when free)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from gpuyard.metrics.sample import GpuReading
from gpuyard.runtime.gpustats import GpuSample

LABELS = ["gpu", "UUID", "device", "modelName", "Hostname", "node", "job", "tenant"]


@dataclass(frozen=True, slots=True)
class DcgmField:
    name: str
    help: str
    read: Callable[[GpuSample], float | None]


FIELDS = (
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda s: s.util_pct),
    DcgmField("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda s: s.fb_used_mib),
    DcgmField("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", lambda s: s.fb_free_mib),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda s: s.temp_c),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda s: s.power_w),
)


def labels(r: GpuReading) -> list[str]:
    s = r.sample
    device = f"nvidia{s.minor if s.minor is not None else s.index}"
    return [str(s.index), s.uuid, device, s.model, r.hostname, r.hostname, r.job, r.tenant]


def dcgm_families(readings: Iterable[GpuReading]) -> Iterator[GaugeMetricFamily]:
    """One family per field; a reading NVML could not give is left out."""
    readings = list(readings)
    for f in FIELDS:
        family = GaugeMetricFamily(f.name, f.help, labels=LABELS)
        for r in readings:
            value = f.read(r.sample)
            if value is not None:
                family.add_metric(labels(r), value)
        yield family
