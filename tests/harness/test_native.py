"""Native tool calling (``protocol="native"``) beside the JSON protocol.

The fake servers speak each API's real tool-calling wire format (OpenAI ``tool_calls``,
Anthropic ``tool_use``/``tool_result``, Ollama ``tools``); requests are checked field by field.
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

import passk_nb
from passk_nb.cli.main import main as cli_main
from passk_nb.data.ids import spec_hash
from passk_nb.data.store import read_specs
from passk_nb.harness.episode import run_episode
from passk_nb.harness.providers.scripted import ScriptedProvider
from passk_nb.harness.spec import RunSpec
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.build import NATIVE_PROTOCOL_TEXT
from passk_nb.view.transcript_html import transcript_html
from tests.helpers.fake_servers import FakeServer, clean_backend_env, run_against

SUITE = get_suite("orders")
WIRES = ["openai", "anthropic", "ollama"]
FAST = {"backoff_base": 0.01, "backoff_max": 0.05, "timeout": 10.0, "max_attempts": 1}
TASK = "refund-delivered"
PROMPT = SUITE.task(TASK).prompt


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    clean_backend_env(monkeypatch)


def run(wire: str, server: FakeServer, tmp_path, **options):
    return run_against(wire, server, tmp_path, protocol="native", **{**FAST, **options})


def calls(*pairs: tuple[str, object], text: str = "") -> dict:
    """A custom native step: these calls (name, arguments exactly as sent) in one reply."""
    return {"text": text, "tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


# -- the full episode through each wire ---------------------------------------------------------------


@pytest.mark.network_local
@pytest.mark.parametrize("wire", WIRES)
def test_every_task_passes_natively_through_each_wire_format(wire, tmp_path):
    with FakeServer(wire) as server:
        df = run(wire, server, tmp_path)
        bodies = [r.body for r in server.chat_requests()]

    assert len(df) == len(SUITE.tasks) and df["outcome"].eq("pass").all(), df["error"].tolist()
    assert set(df["protocol"]) == {"native"} and df["config"].str.startswith("protocol=native, ").all()
    assert (df["n_format_errors"] == 0).all() and (df["n_tool_calls"] > 0).all()
    assert len(bodies) == df["n_turns"].sum() and (df["input_tokens"] > 0).all()
    definitions = SUITE.tool_definitions()
    for body in bodies:
        if wire == "anthropic":
            assert body["tools"] == [
                {"name": d["name"], "description": d["description"], "input_schema": d["parameters"]}
                for d in definitions
            ]
            assert "Reply protocol" not in body["system"] and NATIVE_PROTOCOL_TEXT in body["system"]
        else:
            assert body["tools"] == [
                {
                    "type": "function",
                    "function": {
                        "name": d["name"],
                        "description": d["description"],
                        "parameters": d["parameters"],
                    },
                }
                for d in definitions
            ]
            if wire == "openai":
                assert body["tool_choice"] == "auto"
            else:
                assert "tool_choice" not in body
            system = body["messages"][0]
            assert system["role"] == "system" and NATIVE_PROTOCOL_TEXT in system["content"]
            assert "Reply protocol" not in system["content"]
        assert "response_format" not in body and "format" not in body
    # the tool definitions carry the same signatures as the JSON protocol's schema
    refund = next(d for d in definitions if d["name"] == "refund_order")
    assert refund["parameters"]["properties"]["amount"]["type"] == "number"
    assert refund["parameters"]["required"] == ["order_id", "amount"]
    assert refund["parameters"]["additionalProperties"] is False


def one_task(wire: str, tmp_path, **options) -> tuple[pd.DataFrame, list, list[str]]:
    """One trial of TASK through a fake ``wire`` server: the records, the chat request bodies and
    the tool-call ids the server issued."""
    with FakeServer(wire) as server:
        df = run(wire, server, tmp_path, tasks=[TASK], **options)
        return df, [r.body for r in server.chat_requests()], list(server.issued_ids)


@pytest.mark.network_local
def test_openai_wire_fields_and_ids_echoed(tmp_path):
    df, bodies, issued = one_task("openai", tmp_path)

    assert df["outcome"].tolist() == ["pass"] and len(bodies) == 3 and len(issued) == 2
    first, second, third = bodies
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][1] == {"role": "user", "content": PROMPT}
    assistant, tool = second["messages"][2:]
    assert assistant == {  # no text: no content field (llama_cpp.server refuses content: null)
        "role": "assistant",
        "tool_calls": [
            {
                "id": issued[0],
                "type": "function",
                "function": {"name": "get_order", "arguments": '{"order_id": "O1001"}'},
            }
        ],
    }
    assert set(tool) == {"role", "tool_call_id", "content"}
    assert tool["role"] == "tool" and tool["tool_call_id"] == issued[0]
    assert json.loads(tool["content"])["ok"]["order_id"] == "O1001"
    assert third["messages"][:4] == second["messages"]
    assert third["messages"][4]["tool_calls"][0]["id"] == issued[1]
    assert third["messages"][5]["tool_call_id"] == issued[1]
    assert json.loads(third["messages"][4]["tool_calls"][0]["function"]["arguments"]) == {
        "order_id": "O1001",
        "amount": 79.99,
    }


@pytest.mark.network_local
def test_anthropic_wire_fields_and_ids_echoed(tmp_path):
    df, bodies, issued = one_task("anthropic", tmp_path)

    assert df["outcome"].tolist() == ["pass"] and len(bodies) == 3 and issued[0].startswith("toolu_")
    first, second, _ = bodies
    assert first["messages"] == [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]
    assert "system" in first and isinstance(first["system"], str)
    assistant, result = second["messages"][1:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": issued[0], "name": "get_order", "input": {"order_id": "O1001"}}
        ],
    }
    assert result["role"] == "user" and len(result["content"]) == 1
    block = result["content"][0]
    assert set(block) == {"type", "tool_use_id", "content", "is_error"}
    assert block["type"] == "tool_result" and block["tool_use_id"] == issued[0] and block["is_error"] is False
    assert json.loads(block["content"])["ok"]["status"] == "delivered"
    assert json.loads(df["provider_meta"][0])["resolved_model"] == "test-model-20250101"


@pytest.mark.network_local
def test_ollama_wire_fields(tmp_path):
    df, bodies, _ = one_task("ollama", tmp_path, backend_seed=3)

    assert df["outcome"].tolist() == ["pass"] and len(bodies) == 3
    second = bodies[1]
    assert second["stream"] is False and second["options"]["seed"] == 3
    assistant, tool = second["messages"][2:]
    assert assistant == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_order", "arguments": {"order_id": "O1001"}}}],
    }
    assert set(tool) == {"role", "content", "tool_name"}
    assert tool["role"] == "tool" and tool["tool_name"] == "get_order"
    assert json.loads(tool["content"])["ok"]["order_id"] == "O1001"


@pytest.mark.network_local
@pytest.mark.parametrize("wire", WIRES)
def test_several_calls_in_one_reply_run_in_order(wire, tmp_path):
    script = [
        calls(
            ("get_order", '{"order_id": "O1001"}'),
            ("refund_order", '{"order_id": "O1001", "amount": 79.99}'),
            text="Looking it up and refunding.",
        ),
        {"answer": "Refunded $79.99 for order O1001."},
    ]
    with FakeServer(wire, scripts={TASK: script}) as server:
        df = run(wire, server, tmp_path, tasks=[TASK])
        last = server.chat_requests()[-1].body
        issued = list(server.issued_ids)

    row = df.iloc[0]
    assert row["outcome"] == "pass" and row["n_turns"] == 2 and row["n_tool_calls"] == 2
    entries = json.loads(row["transcript"])
    replies = [e for e in entries if e["kind"] == "reply"]
    assert [e["action"].get("tool") for e in replies[:2]] == ["get_order", "refund_order"]
    assert [e["call_index"] for e in replies[:2]] == [0, 1]
    assert replies[0]["content"].startswith("Looking it up and refunding.")
    results = [e for e in entries if e["kind"] == "tool_result"]
    assert [e["tool"] for e in results] == ["get_order", "refund_order"]
    if wire == "openai":
        assistant, first, second = last["messages"][2:]
        assert assistant["content"] == "Looking it up and refunding."
        assert [c["id"] for c in assistant["tool_calls"]] == issued
        assert [first["tool_call_id"], second["tool_call_id"]] == issued
    elif wire == "anthropic":
        assistant, results_turn = last["messages"][1:]
        assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
        assert [b["tool_use_id"] for b in results_turn["content"]] == issued
    else:
        assistant, first, second = last["messages"][2:]
        assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["get_order", "refund_order"]
        assert [first["tool_name"], second["tool_name"]] == ["get_order", "refund_order"]
    html = transcript_html(row)
    assert "refund_order" in html and "get_order" in html


# -- malformed calls: the JSON protocol's outcomes -----------------------------------------------------

#: (native steps, the same mistake under the JSON protocol, expected outcome, format errors, tool errors)
MALFORMED = {
    "unknown tool": (
        [calls(("delete_everything", "{}")), {"answer": "Done."}],
        [{"tool": "delete_everything", "args": {}}, {"answer": "Done."}],
        "wrong_state",
        0,
        1,
    ),
    "arguments not JSON, twice": (
        [calls(("get_order", '{"order_id": ')), calls(("get_order", "order O1001"))],
        ['{"tool": "get_order", "args": {"order_id": ', '{"tool": "get_order", "args": "O1001"}'],
        "format_error",
        2,
        0,
    ),
    "arguments not an object, then recovers": (
        [calls(("get_order", '["O1001"]')), *SUITE.task(TASK).script],
        ['{"tool": "get_order", "args": ["O1001"]}', *SUITE.task(TASK).script],
        "pass",
        1,
        0,
    ),
    "bad argument type": (
        [calls(("get_order", '{"order_id": 1001}')), {"answer": "Sorry."}],
        [{"tool": "get_order", "args": {"order_id": 1001}}, {"answer": "Sorry."}],
        "wrong_state",
        0,
        1,
    ),
    "empty reply": (
        ["", *SUITE.task(TASK).script],
        ["", *SUITE.task(TASK).script],
        "pass",
        1,
        0,
    ),
}


@pytest.mark.network_local
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_native_calls_have_the_json_protocols_outcomes(case, tmp_path):
    native_steps, json_steps, outcome, n_format, n_tool_errors = MALFORMED[case]
    with FakeServer("openai", scripts={TASK: native_steps}) as server:
        native = run("openai", server, tmp_path, tasks=[TASK]).iloc[0]
        bodies = [r.body for r in server.chat_requests()]
    scripted = ScriptedProvider(scripts={TASK: json_steps})
    json_row = run_episode(SUITE, SUITE.task(TASK), scripted, system_prompt=SUITE.prompts["default"])

    for row in (native, json_row):
        assert (row["outcome"], row["n_format_errors"], row["n_tool_errors"]) == (
            outcome,
            n_format,
            n_tool_errors,
        )
    if case == "arguments not an object, then recovers":
        bad = bodies[1]["messages"][3]  # the bad call is answered as its own tool result
        assert (
            bad["role"] == "tool" and bad["tool_call_id"] == bodies[1]["messages"][2]["tool_calls"][0]["id"]
        )
        assert "Format error: the arguments of get_order must be a JSON object, got list" in bad["content"]
        entry = next(e for e in json.loads(native["transcript"]) if "format_error" in e)
        assert json.loads(entry["content"])["arguments"] == '["O1001"]'  # the call as received stays visible
    if case == "empty reply":
        feedback = bodies[1]["messages"][-1]
        assert feedback["role"] == "user" and feedback["content"].startswith("Format error: empty reply")


def test_format_errors_of_one_reply_end_the_trial_at_the_limit():
    steps = [
        calls(("get_order", "{"), ("get_order", "{"), ("refund_order", '{"order_id": "O1001", "amount": 1}'))
    ]
    row = run_episode(
        SUITE,
        SUITE.task(TASK),
        ScriptedProvider(scripts={TASK: steps}),
        system_prompt="x",
        protocol="native",
    )
    assert row["outcome"] == "format_error" and row["n_format_errors"] == 2
    assert row["n_tool_calls"] == 0 and row["state_diff"] == "[]"  # the third call never ran


# -- identity, records, refusals ----------------------------------------------------------------------


def test_protocol_is_part_of_the_run_id_and_a_record_column(tmp_path):
    json_df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False)
    native_df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, protocol="native")
    assert json_df["run_id"].nunique() == native_df["run_id"].nunique() == 1
    assert json_df["run_id"][0] != native_df["run_id"][0]
    assert set(json_df["protocol"]) == {"json"} and set(json_df["config"]) == {"default"}
    assert set(native_df["protocol"]) == {"native"} and set(native_df["config"]) == {"protocol=native"}
    assert native_df["passed"].all() and json_df["passed"].all()
    specs = read_specs(tmp_path)
    assert (
        "protocol" not in specs[json_df["run_id"][0]]
        and specs[native_df["run_id"][0]]["protocol"] == "native"
    )
    assert spec_hash(specs[native_df["run_id"][0]]) == native_df["run_id"][0]
    both = passk_nb.load(tmp_path)
    assert both.groupby("protocol")["run_id"].nunique().to_dict() == {"json": 1, "native": 1}


def test_the_json_run_id_is_unchanged_by_the_new_field():
    spec = RunSpec("orders", "ollama", "m", None, "abc", 0.7, 0, "off", 10, 2, {"max_tokens": 64})
    old_fields = {k: v for k, v in spec.__dict__.items() if k not in ("protocol", "faults", "perturbation")}
    assert spec.run_id == spec_hash(old_fields)


def test_old_records_without_the_column_load_as_json(tmp_path):
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False)
    for path in tmp_path.rglob("*.parquet"):
        table = pq.read_table(path)
        pq.write_table(table.drop(["protocol"]), path)
        assert "protocol" not in pq.read_schema(path).names
    loaded = passk_nb.load(tmp_path)
    assert len(loaded) == len(df) and set(loaded["protocol"]) == {"json"}


def test_native_needs_a_backend_that_has_it(tmp_path):
    with pytest.raises(ValueError, match=r"native tool calling \(anthropic, ollama, openai, scripted\)"):
        passk_nb.run(lambda messages: '{"answer": "x"}', out=tmp_path, protocol="native", progress=False)
    with pytest.raises(ValueError, match="leave json_mode off"):
        passk_nb.run("ollama", "m", out=tmp_path, protocol="native", json_mode="json", progress=False)
    with pytest.raises(ValueError, match=r"protocol must be one of \['json', 'native'\]"):
        passk_nb.run("scripted", out=tmp_path, protocol="tools", progress=False)
    assert not list(tmp_path.iterdir())  # nothing was run


def test_the_native_backends_named_are_those_whose_class_says_so(tmp_path, monkeypatch):
    from passk_nb.harness.providers import PROVIDERS

    monkeypatch.setitem(PROVIDERS, "my-native", "passk_nb.harness.providers.scripted:ScriptedProvider")
    named = r"native tool calling \(anthropic, my-native, ollama, openai, scripted\)"
    with pytest.raises(ValueError, match=named):
        passk_nb.run(lambda messages: '{"answer": "hi"}', out=tmp_path, protocol="native", progress=False)


def test_a_prompt_of_your_own_is_sent_as_given(tmp_path):
    text = "You are a careful agent. Use the tools, then answer the customer."
    df = passk_nb.run("scripted", trials=1, out=tmp_path, progress=False, protocol="native", prompt=text)
    assert set(df["system_prompt"]) == {text} and df["passed"].all()


def test_cli_runs_natively(tmp_path, capsys):
    argv = ["run", "--provider", "scripted", "--trials", "1", "--k", "1", "--n-boot", "0"]
    assert cli_main([*argv, "--protocol", "native", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "protocol=native" in out
    df = passk_nb.load(tmp_path)
    assert set(df["protocol"]) == {"native"} and df["passed"].all()
    assert cli_main([*argv, "--protocol", "tools", "--out", str(tmp_path)]) == 2


def test_native_transcripts_render_calls_and_results():
    row = run_episode(SUITE, SUITE.task(TASK), ScriptedProvider(), system_prompt="x", protocol="native")
    html = transcript_html(pd.Series({**row, "task": TASK, "trial": 0}))
    assert "get_order" in html and "refund_order" in html and "call_1" in html
    kinds = [e["kind"] for e in json.loads(row["transcript"])]
    assert kinds == ["task", "reply", "tool_result", "reply", "tool_result", "reply"]


# -- reading replies: what each API may send ----------------------------------------------------------


def test_openai_reader_takes_what_servers_send_and_refuses_what_is_not_a_reply():
    from passk_nb.harness.providers.base import ProviderError
    from passk_nb.harness.providers.openai import OpenAIProvider

    read = OpenAIProvider.read_native_reply
    no_id = {
        "choices": [
            {"message": {"content": None, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}}
        ]
    }
    reply = read(no_id)
    assert reply.text == "" and [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_0", "f", {})
    ]
    assert read({"choices": [{"message": {"content": "Done."}}]}).tool_calls == []
    for broken, message in [
        ({"choices": []}, "has no choices.0.message"),
        ({"choices": [{"message": {"content": None}}]}, "neither choices.0.message.content"),
        ({"choices": [{"message": {"content": "", "tool_calls": "f()"}}]}, "not a list of objects"),
    ]:
        with pytest.raises(ProviderError, match=message):
            read(broken)


def test_ollama_reader_and_arguments_sent_back_as_objects():
    from passk_nb.harness.protocol import NativeCall, parse_native_call
    from passk_nb.harness.providers.base import ProviderError
    from passk_nb.harness.providers.ollama import OllamaProvider, ollama_messages

    reply = OllamaProvider.read_native_reply(
        {
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "get_order", "arguments": '{"order_id": "O1"}'}},
                    {"function": {"name": "get_order", "arguments": {"order_id": "O2"}}},
                ],
            },
            "prompt_eval_count": 3,
            "eval_count": 2,
        }
    )
    assert [c.id for c in reply.tool_calls] == ["call_0", "call_1"] and reply.input_tokens == 3
    assert [parse_native_call(c).args for c in reply.tool_calls] == [{"order_id": "O1"}, {"order_id": "O2"}]
    sent = ollama_messages(
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [*reply.tool_calls, NativeCall("call_2", "get_order", "not json")],
            }
        ]
    )
    assert [c["function"]["arguments"] for c in sent[0]["tool_calls"]] == [
        {"order_id": "O1"},
        {"order_id": "O2"},
        {},
    ]
    with pytest.raises(ProviderError, match="neither message.content"):
        OllamaProvider.read_native_reply({"message": {"role": "assistant"}})


def test_anthropic_json_conversation_leaves_out_blank_turns():
    """The API refuses empty and whitespace-only content: a blank reply of the JSON protocol is left
    out and the harness's feedback joins the user turn before it, so roles still alternate."""
    from passk_nb.harness.providers.anthropic import to_anthropic_messages

    system, turns = to_anthropic_messages(
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "\n  "},
            {"role": "user", "content": "Format error: empty reply"},
            {"role": "assistant", "content": '{"tool": "get_order"}'},
            {"role": "user", "content": "Result: {}"},
            {"role": "assistant", "content": ""},
        ]
    )
    assert system == "S"
    assert turns == [
        {"role": "user", "content": "Hi\n\nFormat error: empty reply"},
        {"role": "assistant", "content": '{"tool": "get_order"}'},
        {"role": "user", "content": "Result: {}"},
    ]


def test_anthropic_native_conversation_merges_results_and_leaves_out_empty_turns():
    from passk_nb.harness.protocol import NativeCall
    from passk_nb.harness.providers.anthropic import to_anthropic_native

    a, b = NativeCall("toolu_a", "get_order", {"order_id": "O1"}), NativeCall("toolu_b", "f", "{")
    system, turns = to_anthropic_native(
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "", "tool_calls": []},
            {"role": "user", "content": "Format error: empty reply"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [a, b]},
            {
                "role": "tool",
                "tool_call_id": "toolu_a",
                "name": "get_order",
                "content": "{}",
                "is_error": False,
            },
            {"role": "tool", "tool_call_id": "toolu_b", "name": "f", "content": "bad", "is_error": True},
        ]
    )
    assert system == "S" and [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [blk["text"] for blk in turns[0]["content"]] == ["Hi", "Format error: empty reply"]
    assert turns[1]["content"][2] == {"type": "tool_use", "id": "toolu_b", "name": "f", "input": {}}
    assert [(blk["tool_use_id"], blk["is_error"]) for blk in turns[2]["content"]] == [
        ("toolu_a", False),
        ("toolu_b", True),
    ]


@pytest.mark.parametrize(
    "arguments",
    ["[" * 100_000, '{"a": NaN}', "\ud83d", 12, None, "", "   "],
)
def test_parse_native_call_never_raises(arguments):
    from passk_nb.harness.protocol import FormatError, NativeCall, ToolCall, parse_native_call

    result = parse_native_call(NativeCall("c", "get_order", arguments))
    assert isinstance(result, FormatError | ToolCall)
    if arguments in (None, "", "   "):
        assert result == ToolCall("get_order", {})


def test_native_transcripts_regrade_to_the_same_verdicts(tmp_path):
    script = {
        TASK: [
            calls(
                ("get_order", '{"order_id": "O1001"}'),
                ("refund_order", '{"order_id": "O1001", "amount": 79.99}'),
            ),
            {"answer": "Refunded $79.99 for order O1001."},
        ],
        "cancel-pending-lookup": [calls(("cancel_order", '{"order_id": "O1003"}')), {"answer": "Done."}],
    }
    df = passk_nb.run(
        ScriptedProvider(scripts=script), trials=1, out=tmp_path, progress=False, protocol="native"
    )
    again = passk_nb.regrade(df)
    assert not again["regrade_changed"].any()
    assert (again["outcome"] == df["outcome"]).all() and df["outcome"].eq("pass").sum() >= 4


@pytest.mark.network_local
@pytest.mark.parametrize("protocol", ["json", "native"])
def test_a_refusal_is_the_models_answer_the_same_on_every_backend(protocol, tmp_path, monkeypatch):
    """OpenAI ``content: null`` + ``refusal``, Anthropic ``stop_reason: "refusal"``, Ollama's plain
    text: the model's reply (never infra), the same outcome everywhere, the refusal text kept."""
    from passk_nb.harness.providers import NETWORK_PROVIDERS
    from tests.helpers.fake_servers import FakeServer, Fault, clean_backend_env, run_against

    clean_backend_env(monkeypatch)
    words = "I can't help with refunds."
    outcomes = {}
    for wire in NETWORK_PROVIDERS:
        with FakeServer(wire, rule=lambda body: Fault("refusal", body=words)) as server:
            df = run_against(
                wire, server, tmp_path / wire, tasks=["refund-delivered"], protocol=protocol, max_attempts=1
            )
        assert df["attempts"].iloc[0] >= 1
        outcomes[wire] = df["outcome"].iloc[0]
        assert words in df["transcript"].iloc[0], wire
        if wire != "ollama":  # Ollama has no refusal field: its refusal is plain text
            assert '"refusal": true' in df["provider_meta"].iloc[0], wire
    assert set(outcomes.values()) == {"format_error" if protocol == "json" else "wrong_state"}, outcomes


@pytest.mark.network_local
@pytest.mark.parametrize("protocol", ["json", "native"])
def test_an_anthropic_refusal_without_text_is_the_models_empty_reply(protocol, tmp_path, monkeypatch):
    from tests.helpers.fake_servers import FakeServer, Fault, clean_backend_env, run_against

    clean_backend_env(monkeypatch)
    with FakeServer("anthropic", rule=lambda body: Fault("refusal", body="")) as server:
        df = run_against("anthropic", server, tmp_path, tasks=["refund-delivered"], protocol=protocol)
    assert df["outcome"].tolist() == ["format_error"]  # as Ollama's empty reply
