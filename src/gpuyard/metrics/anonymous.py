"""What an open /metrics shows (`gpuyard up --metrics-open`): the same families without the
labels that name a job, a task or a user, their series summed by what is left (by tenant,
node, GPU), so that anyone who can reach the port learns usage per tenant but no job ids."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

PRIVATE_LABELS = frozenset({"job", "task", "owner", "user"})


class WithoutJobs(Collector):
    """`source`'s families with the private labels aggregated away."""

    def __init__(self, source: Collector) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        for family in self._source.collect():
            yield without_private_labels(family)


def without_private_labels(family: Metric) -> Metric:
    if not any(PRIVATE_LABELS & s.labels.keys() for s in family.samples):
        return family
    sums: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for s in family.samples:
        kept = tuple(sorted((k, v) for k, v in s.labels.items() if k not in PRIVATE_LABELS))
        key = (s.name, kept)
        sums[key] = sums.get(key, 0.0) + s.value
    out = Metric(family.name, family.documentation, family.type, family.unit)
    for (name, labels), value in sums.items():
        out.add_sample(name, dict(labels), value)
    return out
