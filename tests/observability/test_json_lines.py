"""The JSON line itself: the ids of the context it is written in, and every extra field."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from app.observability import JsonFormatter, bound_work
from app.observability.context import serving


def written(emit: Any) -> dict[str, Any]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("ctxsvc.test_json_lines")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        emit(logger)
    finally:
        logger.removeHandler(handler)
    (line,) = stream.getvalue().splitlines()
    return dict(json.loads(line))


def test_a_line_carries_the_request_session_turn_and_trace_of_its_context() -> None:
    tracer = TracerProvider().get_tracer("test")

    def emit(logger: logging.Logger) -> None:
        with (
            serving("req-7"),
            bound_work("ses-1", "turn-2"),
            tracer.start_as_current_span("s") as span,
        ):
            logger.info("hello", extra={"fields": {"event": "x", "count": 3}})
            context = span.get_span_context()
            written_ids.update(trace=f"{context.trace_id:032x}", span=f"{context.span_id:016x}")

    written_ids: dict[str, str] = {}
    line = written(emit)
    assert line["message"] == "hello"
    assert line["level"] == "INFO"
    assert (line["request_id"], line["session_id"], line["turn_id"]) == ("req-7", "ses-1", "turn-2")
    assert (line["trace_id"], line["span_id"]) == (written_ids["trace"], written_ids["span"])
    assert (line["event"], line["count"]) == ("x", 3)


def test_outside_any_request_or_work_only_the_placeholder_request_id() -> None:
    line = written(lambda logger: logger.warning("plain"))
    assert line["request_id"] == "-"
    assert not {"session_id", "turn_id", "trace_id", "span_id"} & set(line)


def test_extra_keys_are_fields_too() -> None:
    line = written(lambda logger: logger.info("skill", extra={"skill": "a", "reason": "b"}))
    assert (line["skill"], line["reason"]) == ("a", "b")
    assert "args" not in line
    assert "msg" not in line
