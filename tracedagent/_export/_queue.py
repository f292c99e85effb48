"""The span queue between the loop and the exporter, and an account of what it drops.

The SDK's ``BatchSpanProcessor`` keeps ended spans in a bounded queue until its worker thread
exports them. When spans end faster than they are exported (a worker thread running agents
without model latency), the queue is full and each new span pushes the oldest out; once
shutdown has begun, it refuses new ones. The SDK logs a line per such span, or nothing; here
each is counted, the first told once as what it is, and the totals at shutdown - never taken
for a collector out of reach.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = ["SpanQueue"]

_log = logging.getLogger("tracedagent")


class SpanQueue(BatchSpanProcessor):
    """The SDK's ``BatchSpanProcessor``, counting the spans it drops instead of logging each.

    Its queue is bounded (``OTEL_BSP_MAX_QUEUE_SIZE``): a span that ends while it is full
    evicts the oldest queued one, and a span that ends after shutdown began is refused. The
    SDK logs a warning per span for the first; both are counted here, the first told once
    as what it is - spans made faster than they are exported, not a collector out of reach -
    and the totals at shutdown (``report_dropped``)."""

    def __init__(self, exporter: Any, where: str) -> None:
        super().__init__(exporter)
        self.where = where
        self.ended = 0
        """Sampled spans that ended, and so came to the queue."""
        self.evicted = 0
        """Queued spans pushed out by newer ones while the queue was full."""
        self.refused = 0
        """Spans that ended after shutdown began."""
        self._count_lock = threading.Lock()
        queue = getattr(self, "_batch_processor", None)
        self._queue = getattr(queue, "_queue", None)
        self._capacity = getattr(queue, "_max_queue_size", None)
        logging.getLogger(type(queue).__module__).addFilter(_queue_full_logs)

    def on_end(self, span: Any) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            with self._count_lock:
                self.ended += 1
                if getattr(self._batch_processor, "_shutdown", False):
                    self.refused += 1
                elif self._queue is not None and len(self._queue) >= (self._capacity or math.inf):
                    self.evicted += 1
                    if self.evicted == 1:
                        _log.warning("tracedagent: the span queue is full (%s spans, OTEL_BSP_MAX_QUEUE_SIZE): "
                                     "spans end faster than they are exported to %s, and the oldest queued are "
                                     "dropped; the count is reported at shutdown", self._capacity, self.where)
        super().on_end(span)

    @property
    def queued(self) -> int:
        return len(self._queue) if self._queue is not None else 0

    def report_dropped(self) -> int:
        """After shutdown: every span that came to the queue and was not sent, said once, by cause."""
        left = self.queued  # still queued when the flush ran out of time
        dropped = self.evicted + self.refused + left
        if dropped:
            _log.warning("tracedagent: %d of the %d spans ended in this process were not exported to %s: %d pushed "
                         "out of the full queue, %d still queued when the flush at shutdown ended, %d ended after "
                         "shutdown began", dropped, self.ended, self.where, self.evicted, left, self.refused)
        return dropped


class _QueueFullLogs(logging.Filter):
    """Drops the SDK's per-span queue-full and after-shutdown records: ``SpanQueue`` counts them."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg if isinstance(record.msg, str) else ""
        return not (message.startswith("Queue full, dropping") or message.startswith("Shutdown called, ignoring"))


_queue_full_logs = _QueueFullLogs()
