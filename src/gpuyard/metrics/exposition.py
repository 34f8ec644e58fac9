"""One registry per app: the scrape-time cluster collector, the controller's instruments, the
notify channel's counters and the process' own metrics (`process_*`), rendered in
Prometheus' text format."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from gpuyard.metrics.collector import ClusterCollector
from gpuyard.metrics.instruments import Instruments
from gpuyard.metrics.notifystats import NotifyCollector

CONTENT_TYPE = CONTENT_TYPE_LATEST


def build_registry(cluster: ClusterCollector, instruments: Instruments) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(cluster)
    registry.register(instruments)
    registry.register(NotifyCollector())
    ProcessCollector(registry=registry)
    return registry


def render(registry: Collector) -> bytes:
    return generate_latest(registry)
