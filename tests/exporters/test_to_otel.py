"""to_otel: trials as OpenTelemetry spans and gen_ai.evaluation.result events, through the SDK."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.fake_servers import require
from tests.helpers.records import records_from_marks

HAVE_OTEL = importlib.util.find_spec("opentelemetry.sdk") is not None and (
    importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is not None
)


@pytest.fixture(autouse=True)
def _needs_otel() -> None:
    require(HAVE_OTEL, "the OpenTelemetry SDK and OTLP/HTTP exporter (pip install 'passk-nb[otel]')")


def memory_providers():
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    logger = LoggerProvider()
    logger.add_log_record_processor(SimpleLogRecordProcessor(logs))
    return tracer, logger, spans, logs


def test_one_evaluation_event_per_trial_in_its_span(tmp_path: Path) -> None:
    from passk_nb import to_otel

    records = records_from_marks({("m", "p", "t1"): "10i", ("m", "p", "t2"): "x"})
    tracer, logger, spans, logs = memory_providers()
    assert to_otel(records, tracer_provider=tracer, logger_provider=logger) == 4
    events = [r.log_record for r in logs.get_finished_logs()]
    assert [e.event_name for e in events] == ["gen_ai.evaluation.result"] * 4
    by_trial = {(e.attributes["passk.task"], e.attributes["passk.trial"]): e for e in events}
    assert by_trial[("t1", 0)].attributes["gen_ai.evaluation.score.value"] == 1.0
    assert by_trial[("t1", 1)].attributes["gen_ai.evaluation.score.value"] == 0.0
    assert by_trial[("t1", 1)].attributes["gen_ai.evaluation.score.label"] == "wrong_state"
    assert by_trial[("t2", 0)].attributes["gen_ai.evaluation.score.label"] == "format_error"
    infra = by_trial[("t1", 2)].attributes
    assert "gen_ai.evaluation.score.value" not in infra and infra["error.type"] == "infra_error"
    assert all(e.attributes["gen_ai.evaluation.name"] == "state_check" for e in events)
    # each event sits in its trial's span
    trial_spans = {s.attributes["gen_ai.conversation.id"]: s for s in spans.get_finished_spans()}
    for event in events:
        span = trial_spans[f"m-p/{event.attributes['passk.task']}/{event.attributes['passk.trial']}"]
        assert event.trace_id == span.context.trace_id and event.span_id == span.context.span_id
    assert trial_spans["m-p/t1/2"].status.status_code.name == "ERROR"


def test_a_real_run_has_a_span_per_reply_and_tool_call(tmp_path: Path) -> None:
    from passk_nb import run, to_otel

    df = run("scripted", trials=1, out=tmp_path, progress=False)
    tracer, logger, spans, _ = memory_providers()
    to_otel(df, tracer_provider=tracer, logger_provider=logger)
    finished = spans.get_finished_spans()
    for row in df.to_dict("records"):
        entries = json.loads(row["transcript"])
        [parent] = [s for s in finished if s.attributes.get("passk.task") == row["task"]]
        children = sorted(
            (s for s in finished if s.parent and s.parent.span_id == parent.context.span_id),
            key=lambda s: s.start_time,
        )
        assert [s.name.split()[0] for s in children] == [
            {"reply": "chat", "tool_result": "execute_tool"}[e["kind"]]
            for e in entries
            if e["kind"] in ("reply", "tool_result")
        ]
        tools = [s.attributes["gen_ai.tool.name"] for s in children if s.name.startswith("execute_tool")]
        assert tools == [e["tool"] for e in entries if e["kind"] == "tool_result"]
        assert parent.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert parent.start_time == pd.Timestamp(row["started_at"]).value
        assert all(parent.start_time <= c.start_time <= c.end_time <= parent.end_time for c in children)


class _Collector(BaseHTTPRequestHandler):
    """A collector stub: decodes each OTLP/HTTP protobuf request it is sent."""

    received: dict[str, list] = {}
    delay = 0.0  # seconds before answering: a slow collector

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers["Content-Length"]))
        kind = {"/v1/traces": ExportTraceServiceRequest, "/v1/logs": ExportLogsServiceRequest}[self.path]
        message = kind()
        message.ParseFromString(body)
        self.received.setdefault(self.path, []).append((self.headers["Content-Type"], message))
        time.sleep(self.delay)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.network_local
def test_otlp_http_reaches_a_collector_on_localhost() -> None:
    from passk_nb import to_otel

    _Collector.received = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        records = records_from_marks({("m", "p", "t1"): "101"})
        assert to_otel(records, endpoint=f"http://127.0.0.1:{server.server_port}") == 3
    finally:
        server.shutdown()
        server.server_close()
    got = _Collector.received
    assert {ctype for ctype, _ in got["/v1/traces"] + got["/v1/logs"]} == {"application/x-protobuf"}
    spans = [
        s for _, m in got["/v1/traces"] for rs in m.resource_spans for ss in rs.scope_spans for s in ss.spans
    ]
    assert sorted(s.name for s in spans) == ["invoke_agent orders/t1"] * 3
    logs = [
        r
        for _, m in got["/v1/logs"]
        for rl in m.resource_logs
        for sl in rl.scope_logs
        for r in sl.log_records
    ]
    assert [r.event_name for r in logs] == ["gen_ai.evaluation.result"] * 3
    scores = sorted(
        a.value.double_value for r in logs for a in r.attributes if a.key == "gen_ai.evaluation.score.value"
    )
    assert scores == [0.0, 1.0, 1.0]
    resource = got["/v1/logs"][0][1].resource_logs[0].resource
    assert any(a.key == "service.name" and a.value.string_value == "passk-nb" for a in resource.attributes)


@pytest.mark.network_local
def test_more_trials_than_the_sdks_batch_queue_all_arrive_at_a_slow_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from passk_nb import to_otel

    _Collector.received = {}
    monkeypatch.setattr(_Collector, "delay", 0.2)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        records = records_from_marks({("m", "p", f"t{i}"): "10" for i in range(3000)})  # 6,000 trials
        assert to_otel(records, endpoint=f"http://127.0.0.1:{server.server_port}") == 6000
    finally:
        server.shutdown()
        server.server_close()
    got = _Collector.received
    n_spans = sum(
        len(ss.spans) for _, m in got["/v1/traces"] for rs in m.resource_spans for ss in rs.scope_spans
    )
    n_logs = sum(
        len(sl.log_records) for _, m in got["/v1/logs"] for rl in m.resource_logs for sl in rl.scope_logs
    )
    assert n_spans == n_logs == 6000  # the SDK's default queue (2048) would have dropped some


def test_bad_input_is_named() -> None:
    from passk_nb import to_otel

    records = records_from_marks({("m", "p", "t1"): "1"})
    with pytest.raises(ValueError, match=r"record columns \['outcome'\]"):
        to_otel(records.drop(columns="outcome"))
    with pytest.raises(ValueError, match="OTLP/HTTP address"):
        to_otel(records, endpoint="127.0.0.1:4318")
    tracer, logger, _, _ = memory_providers()
    with pytest.raises(ValueError, match="not both"):
        to_otel(records, endpoint="http://127.0.0.1:4318", tracer_provider=tracer)


@pytest.mark.network_local
def test_a_collector_that_is_not_there_is_an_error_not_a_silent_drop() -> None:
    import socket

    from passk_nb import to_otel

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(
        ConnectionError, match=rf"collector at http://127.0.0.1:{port} did not take 2 of the exports"
    ):
        to_otel(records_from_marks({("m", "p", "t1"): "1"}), endpoint=f"http://127.0.0.1:{port}")


def test_passk_export_to_otel_needs_an_endpoint(tmp_path: Path, capsys) -> None:
    from passk_nb.cli.main import main

    assert (
        main(
            [
                "run",
                "--provider",
                "scripted",
                "--trials",
                "1",
                "--out",
                str(tmp_path),
                "--quiet",
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["export", str(tmp_path), "--to", "otel"]) == 2
    assert "--endpoint" in capsys.readouterr().err
    assert main(["export", str(tmp_path), "--to", "otel", "--endpoint", "localhost:4318"]) == 2
    assert (
        "--endpoint localhost:4318: give the collector's address as http://HOST:PORT"
        in capsys.readouterr().err
    )
