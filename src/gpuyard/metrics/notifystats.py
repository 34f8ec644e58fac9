"""The notify channel's counters (`runtime.notify.STATS`) as metric families: datagrams by
outcome (accepted from a supervisor, rejected from another uid) and the controller wake-ups
they caused. With the Ray engine each node's listener is in its agent, not in the server."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric

from gpuyard.runtime.notify import STATS


class NotifyCollector:
    def collect(self) -> Iterator[Metric]:
        datagrams = CounterMetricFamily(
            "gpuyard_notify_datagrams",
            "Datagrams on this server's notify sockets: accepted (from root or the server's "
            "uid) or rejected (any other sender).",
            labels=["outcome"],
        )
        datagrams.add_metric(["accepted"], STATS.accepted)
        datagrams.add_metric(["rejected"], STATS.rejected)
        yield datagrams
        yield CounterMetricFamily(
            "gpuyard_notify_wakeups",
            "Controller wake-ups from notify hints (at most one per batch of datagrams).",
            value=STATS.hints,
        )
