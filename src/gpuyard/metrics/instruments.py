"""What can only be counted as it happens: histograms and counters the controller feeds.

One `Instruments` per controller, registered in no global registry (`build_registry` adds it
to the app's), so tests and several controllers in one process never share numbers.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric

QUEUEING_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Instruments:
    def __init__(self) -> None:
        self.queueing_delay = Histogram(
            "gpuyard_job_queueing_delay_seconds",
            "Time from a job's submission to its first start, observed when it starts.",
            ["tenant"],
            buckets=QUEUEING_BUCKETS,
            registry=None,
        )
        self.controller_cycle = Histogram(
            "gpuyard_controller_cycle_seconds",
            "Duration of one whole controller cycle (observe, settle, enforce, schedule).",
            buckets=CYCLE_BUCKETS,
            registry=None,
        )
        self.scheduling_cycle = Histogram(
            "gpuyard_scheduling_cycle_seconds",
            "Duration of the schedule phase (snapshot, scheduler, bind, start) with jobs queued.",
            buckets=CYCLE_BUCKETS,
            registry=None,
        )
        self.jobs_finished = Counter(
            "gpuyard_jobs_finished",
            "Jobs that reached an end state, by tenant and state.",
            ["tenant", "state"],
            registry=None,
        )
        self.idle_gpu = Counter(
            "gpuyard_idle_gpu_jobs",
            "Jobs found with every GPU idle for their tenant's window, by the action taken.",
            ["tenant", "action"],
            registry=None,
        )
        self.image_pull_retries = Counter(  # counted by the controller (loop._show_detail)
            "gpuyard_image_pull_retries",
            "Image pulls tried again after a transient failure, by its kind (runtime/pulls.py).",
            ["kind"],
            registry=None,
        )
        self.webhook_deliveries = Counter(
            "gpuyard_webhook_deliveries",
            "Webhook notifications by outcome: delivered, or failed after every attempt.",
            ["outcome"],
            registry=None,
        )
        self.webhook_attempts = Counter(
            "gpuyard_webhook_attempts", "Webhook POSTs tried, retries included.", registry=None
        )
        self.webhook_dropped = Counter(
            "gpuyard_webhook_dropped",
            "Webhook notifications dropped because the queue was full (the oldest goes).",
            registry=None,
        )
        self.webhook_queue = Gauge(
            "gpuyard_webhook_queue_length", "Notifications waiting to be sent.", registry=None
        )
        self.mail_deliveries = Counter(
            "gpuyard_mail_deliveries",
            "Job e-mails by outcome: sent; failed after every attempt; dropped (queue full).",
            ["outcome"],
            registry=None,
        )
        self.leader = Gauge(  # set by controller/leader.py (docs/ha.md)
            "gpuyard_leader",
            "1 while this server is the leader (runs the controller), 0 while it follows.",
            registry=None,
        )
        self.leader_term = Gauge(
            "gpuyard_leader_term",
            "The lease's term (elections so far) when this server was last elected; 0: never.",
            registry=None,
        )

    def collect(self) -> Iterator[Metric]:
        for metric in (
            self.queueing_delay,
            self.controller_cycle,
            self.scheduling_cycle,
            self.jobs_finished,
            self.idle_gpu,
            self.image_pull_retries,
            self.webhook_deliveries,
            self.webhook_attempts,
            self.webhook_dropped,
            self.webhook_queue,
            self.mail_deliveries,
            self.leader,
            self.leader_term,
        ):
            yield from metric.collect()
