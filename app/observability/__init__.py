"""Observability: structured logs, Prometheus metrics and OpenTelemetry traces.

- ``context``: the request id and the session/turn ids every log line carries;
- ``logs``: the JSON formatter and the event lines;
- ``metrics`` / ``exposition``: the metric definitions and the ``/metrics`` text (one process,
  or all workers in prometheus-client's multiprocess mode);
- ``tracing``: traces from the ``OTEL_*`` environment variables (off unless asked for), and the
  FastAPI and SQLAlchemy instrumentations; ``provider_requests``: the provider HTTP client's
  span per request;
- ``model_calls``, ``turns``, ``compactions``: what is recorded of each model call, turn and
  compaction; ``observer.Observability`` is the handle the services are given.

``docs/observability.md`` lists every log field, metric and span.
"""

from app.observability.compactions import note_source
from app.observability.context import bound_work, current_request, request_id_var
from app.observability.exposition import metrics_text
from app.observability.logs import JsonFormatter, configure_logging, configure_text_logging
from app.observability.metrics import Metrics, pool_figures
from app.observability.model_calls import CallTarget
from app.observability.observer import Observability, Timed
from app.observability.tracing import TracingConfigError

__all__ = [
    "CallTarget",
    "JsonFormatter",
    "Metrics",
    "Observability",
    "Timed",
    "TracingConfigError",
    "bound_work",
    "configure_logging",
    "configure_text_logging",
    "current_request",
    "metrics_text",
    "note_source",
    "pool_figures",
    "request_id_var",
]
