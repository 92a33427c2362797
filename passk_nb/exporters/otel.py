"""Trial records as OpenTelemetry traces and GenAI evaluation events: :func:`to_otel`.

Follows the OpenTelemetry GenAI semantic conventions (``semantic-conventions-genai``,
``model/gen-ai/events.yaml`` and the agent/tool span conventions); the attribute names are the
constants of ``opentelemetry-semantic-conventions`` (``gen_ai_attributes``), not typed here.
Everything goes through the OpenTelemetry SDK, so any of its exporters (OTLP/HTTP to a
collector, MLflow ≥ 3.6, a console) receives it. Install the extra:
``pip install "passk-nb[otel]"``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from passk_nb.data.records import OUTCOMES
from passk_nb.data.redact import mask_frame
from passk_nb.data.transcript import parse_transcript

#: The evaluation name each trial's event carries (the task's check on the final state).
EVALUATION = "state_check"
#: The event name of the GenAI conventions for an evaluation result.
EVENT = "gen_ai.evaluation.result"
_INSTALL = 'pip install "passk-nb[otel]"'
_NEEDED = ("run_id", "suite", "task", "trial", "passed", "outcome")
#: With endpoint=, the batch processors' queue length: the SDK's default (2048) drops whatever
#: a large run emits faster than a slow collector takes it.
QUEUE = 2**20


def to_otel(
    df: pd.DataFrame,
    *,
    tracer_provider: Any = None,
    logger_provider: Any = None,
    endpoint: str | None = None,
) -> int:
    """Emit ``df``'s trials through OpenTelemetry; returns the number of trials emitted.

    Per trial:

    - one span ``invoke_agent <suite>/<task>`` (``gen_ai.operation.name`` ``invoke_agent``,
      ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.agent.name`` the suite,
      ``gen_ai.conversation.id`` ``<run_id>/<task>/<trial>``, token usage, and ``passk.*``
      attributes: run id, task, trial, outcome, prompt, config), from the trial's start over its
      latency; status ERROR for an infrastructure error;
    - under it, where the transcript has them, one ``chat <model>`` span per model reply and
      one ``execute_tool <tool>`` span per tool result (``gen_ai.tool.name``,
      ``gen_ai.tool.call.id``). The records keep each reply's latency, not tool times: replies
      are laid end to end from the trial's start, tool spans take no time;
    - one ``gen_ai.evaluation.result`` event (a log record with that event name, in the trial
      span's context): ``gen_ai.evaluation.name`` ``state_check``,
      ``gen_ai.evaluation.score.value`` 1.0 or 0.0, ``gen_ai.evaluation.score.label`` the
      outcome (``pass``, ``wrong_state``…), ``gen_ai.evaluation.explanation`` the error if any.
      An infrastructure error has no score: ``error.type`` ``infra_error`` instead.

    ``tracer_provider`` / ``logger_provider`` default to the global ones
    (``opentelemetry.trace.get_tracer_provider()``); ``endpoint`` (e.g.
    ``"http://127.0.0.1:4318"``) instead sends both over OTLP/HTTP to that collector and flushes
    before returning. Lost: the texts of messages (not sent: they may be private), the final
    state, and exact tool timings.

    >>> import pytest; _ = pytest.importorskip("opentelemetry.sdk")  # needs passk-nb[otel]
    >>> import tempfile, passk_nb
    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    >>> spans = InMemorySpanExporter()
    >>> tracer = TracerProvider(); tracer.add_span_processor(SimpleSpanProcessor(spans))
    >>> df = passk_nb.run("scripted", trials=1, out=tempfile.mkdtemp(), progress=False)
    >>> to_otel(df, tracer_provider=tracer)
    5
    >>> sorted({s.name.split()[0] for s in spans.get_finished_spans()})
    ['chat', 'execute_tool', 'invoke_agent']
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"to_otel needs a DataFrame of trial records, got {type(df).__name__}")
    df = mask_frame(df)  # credentials out of what leaves: errors, transcripts, metadata
    missing = [c for c in _NEEDED if c not in df.columns]
    if missing:
        raise ValueError(f"to_otel needs the record columns {missing}: pass records from passk_nb.load/run")
    bad = sorted(set(df["outcome"]) - set(OUTCOMES))
    if bad:
        raise ValueError(f"to_otel: outcomes {bad[:5]} are not passk-nb outcomes ({', '.join(OUTCOMES)})")
    try:
        from opentelemetry import _logs, trace
    except ImportError as err:
        raise ImportError(f"to_otel emits through OpenTelemetry, which is not installed: {_INSTALL}") from err
    owned: list[Any] = []
    failures: list[str] = []
    if endpoint is not None:
        if tracer_provider is not None or logger_provider is not None:
            raise ValueError("to_otel: give endpoint= or the providers, not both")
        tracer_provider, logger_provider = _otlp_providers(endpoint, failures)
        owned = [tracer_provider, logger_provider]
    tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("passk_nb")
    logger = (logger_provider or _logs.get_logger_provider()).get_logger("passk_nb")
    try:
        for row in df.to_dict("records"):
            _emit_trial(row, tracer, logger)
    finally:
        for provider in owned:
            provider.force_flush()
            provider.shutdown()
    if failures:
        raise ConnectionError(
            f"the collector at {endpoint} did not take {len(failures)} of the exports "
            f"({', '.join(failures)}): is it running and does it accept OTLP/HTTP (port 4318)?"
        )
    return len(df)


def _otlp_providers(endpoint: str, failures: list[str]) -> tuple[Any, Any]:
    """Tracer and logger providers exporting over OTLP/HTTP to ``endpoint``; each export the
    collector does not take is noted in ``failures`` (the SDK would only log it)."""
    try:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import (
            BatchLogRecordProcessor,
            LogRecordExporter,
            LogRecordExportResult,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    except ImportError as err:
        raise ImportError(f"to_otel(endpoint=) needs the OTLP/HTTP exporter: {_INSTALL}") from err
    if not endpoint.startswith(("http://", "https://")):
        raise ValueError(
            f"endpoint={endpoint!r}: give the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318"
        )
    base = endpoint.rstrip("/")

    class CheckedSpans(SpanExporter):
        def __init__(self) -> None:
            self.inner = OTLPSpanExporter(endpoint=f"{base}/v1/traces", timeout=5)

        def export(self, spans: Any) -> Any:
            result = self.inner.export(spans)
            if result != SpanExportResult.SUCCESS:
                failures.append(f"{len(spans)} spans")
            return result

        def shutdown(self) -> None:
            self.inner.shutdown()

    class CheckedLogs(LogRecordExporter):
        def __init__(self) -> None:
            self.inner = OTLPLogExporter(endpoint=f"{base}/v1/logs", timeout=5)

        def export(self, batch: Any) -> Any:
            result = self.inner.export(batch)
            if result != LogRecordExportResult.SUCCESS:
                failures.append(f"{len(batch)} events")
            return result

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return bool(self.inner.force_flush(timeout_millis))

        def shutdown(self) -> None:
            self.inner.shutdown()

    resource = Resource.create({"service.name": "passk-nb"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(CheckedSpans(), max_queue_size=QUEUE))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(CheckedLogs(), max_queue_size=QUEUE))
    return tracer_provider, logger_provider


def _nanos(stamp: Any) -> int | None:
    if stamp is None or (not isinstance(stamp, str) and pd.isna(stamp)):
        return None
    return int(pd.Timestamp(stamp).value)


def _seconds(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) and number > 0 else 0.0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _emit_trial(row: dict[str, Any], tracer: Any, logger: Any) -> None:
    from opentelemetry import trace
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
    from opentelemetry.semconv.attributes import error_attributes
    from opentelemetry.trace import Status, StatusCode

    model = _text(row.get("model"))
    outcome = str(row["outcome"])
    start = _nanos(row.get("started_at"))
    latency_ns = int(_seconds(row.get("latency_s")) * 1e9)
    attributes: dict[str, Any] = {
        gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value,
        gen_ai.GEN_AI_PROVIDER_NAME: _text(row.get("provider")),
        gen_ai.GEN_AI_REQUEST_MODEL: model,
        gen_ai.GEN_AI_AGENT_NAME: str(row["suite"]),
        gen_ai.GEN_AI_CONVERSATION_ID: f"{row['run_id']}/{row['task']}/{row['trial']}",
        "passk.run_id": str(row["run_id"]),
        "passk.suite": str(row["suite"]),
        "passk.task": str(row["task"]),
        "passk.trial": int(row["trial"]),
        "passk.outcome": outcome,
        "passk.passed": bool(row["passed"]),
    }
    for column in ("prompt_name", "prompt_hash", "config"):
        if _text(row.get(column)):
            attributes[f"passk.{column}"] = row[column]
    for column, key in (
        ("input_tokens", gen_ai.GEN_AI_USAGE_INPUT_TOKENS),
        ("output_tokens", gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS),
    ):
        value = row.get(column)
        if value is not None and not pd.isna(value):
            attributes[key] = int(value)
    span = tracer.start_span(
        f"invoke_agent {row['suite']}/{row['task']}", attributes=attributes, start_time=start
    )
    context = trace.set_span_in_context(span)
    clock = start if start is not None else None
    for entry in parse_transcript(row.get("transcript")):
        kind = entry.get("kind")
        if kind == "reply":
            took = int(_seconds(entry.get("latency_s")) * 1e9)
            child = tracer.start_span(
                f"chat {model}",
                context=context,
                start_time=clock,
                attributes={
                    gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.CHAT.value,
                    gen_ai.GEN_AI_REQUEST_MODEL: model,
                    gen_ai.GEN_AI_PROVIDER_NAME: _text(row.get("provider")),
                },
            )
            clock = None if clock is None else clock + took
            child.end(end_time=clock)
        elif kind == "tool_result":
            tool = _text(entry.get("tool")) or "tool"
            tool_attributes = {
                gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value,
                gen_ai.GEN_AI_TOOL_NAME: tool,
            }
            if _text(entry.get("tool_call_id")):
                tool_attributes[gen_ai.GEN_AI_TOOL_CALL_ID] = entry["tool_call_id"]
            child = tracer.start_span(
                f"execute_tool {tool}", context=context, start_time=clock, attributes=tool_attributes
            )
            if entry.get("error"):
                child.set_status(Status(StatusCode.ERROR, "the tool returned an error"))
                child.set_attribute(error_attributes.ERROR_TYPE, "tool_error")
            child.end(end_time=clock)
    event: dict[str, Any] = {
        gen_ai.GEN_AI_EVALUATION_NAME: EVALUATION,
        gen_ai.GEN_AI_EVALUATION_SCORE_LABEL: outcome,
        "passk.run_id": str(row["run_id"]),
        "passk.task": str(row["task"]),
        "passk.trial": int(row["trial"]),
    }
    error = _text(row.get("error"))
    if error:
        event[gen_ai.GEN_AI_EVALUATION_EXPLANATION] = error[:2000]
    if outcome == "infra_error":
        event[error_attributes.ERROR_TYPE] = "infra_error"
        span.set_status(Status(StatusCode.ERROR, error[:200] or "infra_error"))
    else:
        event[gen_ai.GEN_AI_EVALUATION_SCORE_VALUE] = 1.0 if bool(row["passed"]) else 0.0
    end = None if start is None else start + latency_ns
    logger.emit(
        timestamp=end,
        context=context,
        attributes=event,
        event_name=EVENT,
        body=json.dumps({"outcome": outcome}),
    )
    span.end(end_time=end)
