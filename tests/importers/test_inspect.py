"""from_inspect: real inspect_ai logs (mock model, several epochs) as trial records.

The logs are written by inspect_ai itself, in a subprocess (its eval loop sets up logging
and an event loop of its own), with the mock model ``mockllm/model``: no network, no
telemetry. pass@k / pass^k per task are checked against inspect_ai's own ``pass_at(k)``
and ``pass_k(k)`` epoch reducers computed on the same log.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from passk_nb.data.ids import content_id
from passk_nb.data.records import COLUMNS
from passk_nb.importers.checks import ImportFormatError
from passk_nb.importers.inspect_ai import from_inspect
from passk_nb.stats.summary import summarize
from tests.helpers.fake_servers import require

HAVE_INSPECT = importlib.util.find_spec("inspect_ai") is not None

#: Per sample: the mock model's replies over the four epochs (the target is "x") and the
#: pattern the epoch-aware scorer follows (C: correct in that epoch).
REPLIES = {"a": "xyxx", "b": "yyyy", "c": "xxxx", "4": "yxyy"}
PATTERNS = {"a": "CICC", "b": "IIII", "c": "CCCC", "4": "ICII"}

GENERATE = textwrap.dedent(
    """
    import collections, sys
    from inspect_ai import Epochs, Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import (CORRECT, INCORRECT, Score, Target, accuracy, match, mean,
                                   pass_at, pass_k, scorer)
    from inspect_ai.solver import TaskState, generate, use_tools
    from inspect_ai.tool import ToolError, tool

    REPLIES = {replies!r}
    PATTERNS = {patterns!r}

    @scorer(metrics=[accuracy()])
    def pattern():
        async def score(state: TaskState, target: Target) -> Score:
            return Score(value=CORRECT if state.metadata["pattern"][state.epoch - 1] == "C" else INCORRECT)
        return score

    @scorer(metrics=[mean()])
    def numeric():
        async def score(state: TaskState, target: Target) -> Score:
            return Score(value=state.epoch / 4)
        return score

    calls = collections.Counter()

    def outputs(input, tools, tool_choice, config):
        # each sample's replies in turn; with usage given, the mock model counts no tokens
        question = input[-1].text
        reply = REPLIES[question[1:]][calls[question]]
        calls[question] += 1
        out = ModelOutput.from_content(model="mockllm", content=reply)
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return out

    @tool
    def lookup():
        async def execute(key: str) -> str:
            '''Look a key up.

            Args:
                key: The key.
            '''
            if key == "missing":
                raise ToolError("no such key")
            return "found"
        return execute

    def with_a_tool_call(input, tools, tool_choice, config):
        # first a tool call (sample b asks for a key that is missing), then the reply
        if input[-1].role != "tool":
            key = "missing" if input[-1].text == "qb" else "k"
            call = ModelOutput.for_tool_call("mockllm", "lookup", {{"key": key}})
            call.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)  # no tokenizer
            return call
        question = [m for m in input if m.role == "user"][-1].text
        return outputs([question_message(question)], tools, tool_choice, config)

    def question_message(text):
        from inspect_ai.model import ChatMessageUser
        return ChatMessageUser(content=text)

    def samples():
        return [Sample(id=int(i) if i.isdigit() else i, input="q" + i, target="x",
                       metadata={{"pattern": PATTERNS[i]}}) for i in REPLIES]

    reducers = [pass_at(1), pass_at(2), pass_at(3), pass_k(2), pass_k(3)]
    tiny = Task(name="tiny", dataset=samples(), solver=generate(),
                scorer=[match(), pattern(), numeric()], epochs=Epochs(4, reducers))
    other = Task(name="other", dataset=samples()[:2], solver=[use_tools(lookup()), generate()],
                 scorer=match(), epochs=Epochs(2, [pass_at(1)]))
    log_dir = sys.argv[1]
    [first] = eval(tiny, model=get_model("mockllm/model", custom_outputs=outputs),
                   log_dir=log_dir, log_format="eval", display="none")
    calls.clear()
    [second] = eval(other, model=get_model("mockllm/model", custom_outputs=with_a_tool_call),
                    log_dir=log_dir, log_format="json", display="none")
    assert first.status == second.status == "success", (first.error, second.error)
    print(first.location)
    print(second.location)

    # --- task 'desk' (its own folder): several tool calls per reply, a call the model garbled,
    # a tool error, markup in every text, the answer as a list of content parts
    from inspect_ai.model import ChatMessageAssistant, ContentText
    from inspect_ai.tool import ToolCall

    @tool
    def find():
        async def execute(key: str) -> str:
            '''Find a record.

            Args:
                key: The record's key.
            '''
            if key not in ("k1", "k2"):
                raise ToolError(f"no record {{key}}")
            return f"record <{{key}}>"
        return execute

    @tool
    def cancel():
        async def execute(key: str) -> str:
            '''Cancel a record.

            Args:
                key: The record's key.
            '''
            return f"cancelled {{key}}"
        return execute

    starts = collections.Counter()

    def desk(input, tools, tool_choice, config):
        # turn 1 picks k1 or k2 (alternating over conversations); later turns read the pick back
        turn = sum(m.role == "assistant" for m in input)
        if turn == 0:
            key = "k1" if starts["n"] % 2 == 0 else "k2"
            starts["n"] += 1
            calls = [ToolCall(id="t1", function="find", arguments={{"key": key}}),
                     ToolCall(id="t2", function="find", arguments={{"key": "<script>alert(1)</script>"}})]
            message = ChatMessageAssistant(content="Looking <b>both</b> up.", tool_calls=calls)
        else:
            first = [m for m in input if m.role == "assistant"][0]
            key = first.tool_calls[0].arguments["key"]
            if turn == 1:
                calls = [ToolCall(id="t3", function="cancel", arguments={{}},
                                  parse_error="Expecting value: line 1 column 9")]
                message = ChatMessageAssistant(content="", tool_calls=calls)
            elif turn == 2:
                calls = [ToolCall(id="t4", function="cancel", arguments={{"key": key}})]
                message = ChatMessageAssistant(content="", tool_calls=calls)
            else:
                answer = ContentText(text=f"Cancelled <i>{{key}}</i> & done.")
                message = ChatMessageAssistant(content=[answer])
        out = ModelOutput.from_message(message, stop_reason="tool_calls" if message.tool_calls else "stop")
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return out

    @scorer(metrics=[accuracy()])
    def cancelled_k1():
        async def score(state: TaskState, target: Target) -> Score:
            keys = [c.arguments.get("key") for m in state.messages if m.role == "assistant"
                    for c in m.tool_calls or [] if c.function == "cancel"]
            return Score(value=CORRECT if "k1" in keys else INCORRECT)
        return score

    desk_task = Task(name="desk", dataset=[Sample(id="d", input="Cancel my <u>record</u>", target="k1")],
                     solver=[use_tools(find(), cancel()), generate()], scorer=cancelled_k1(), epochs=4)
    [third] = eval(desk_task, model=get_model("mockllm/model", custom_outputs=desk), temperature=0.5,
                   log_dir=sys.argv[2], log_format="eval", display="none")
    assert third.status == "success", third.error
    print(third.location)
    """
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the .eval log of task 'tiny', the .json log of task 'other', the .eval log of task 'desk',
    in a folder of its own), written by inspect_ai."""
    require(HAVE_INSPECT, "inspect_ai (pip install -e '.[inspect]')")
    log_dir = tmp_path_factory.mktemp("inspect_logs")
    desk_dir = tmp_path_factory.mktemp("inspect_desk_logs")
    script = log_dir.parent / "generate_inspect_logs.py"
    script.write_text(GENERATE.format(replies=REPLIES, patterns=PATTERNS), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
    env.update({"INSPECT_LOG_DIR": str(log_dir), "NO_COLOR": "1"})  # no INSPECT_TELEMETRY hook
    done = subprocess.run(
        [sys.executable, str(script), str(log_dir), str(desk_dir)],
        env=env,
        cwd=log_dir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, second, third = (Path(line.removeprefix("file://")) for line in done.stdout.split())
    assert first.suffix == ".eval" and second.suffix == ".json" and third.suffix == ".eval"
    return first, second, third


@pytest.fixture(scope="module")
def logs(generated: tuple[Path, Path, Path]) -> tuple[Path, Path]:
    """(the .eval log of task 'tiny', the .json log of task 'other'), in one folder."""
    return generated[0], generated[1]


@pytest.fixture(scope="module")
def desk(generated: tuple[Path, Path, Path]) -> Path:
    """The .eval log of task 'desk': a tool-calling conversation over four epochs."""
    return generated[2]


def read(path: Path) -> Any:
    from inspect_ai.log import read_eval_log

    return read_eval_log(str(path))


@pytest.mark.slow
@pytest.mark.parametrize("scorer", ["match", "pattern"])
def test_pass_at_k_and_pass_hat_k_per_task_match_inspects_own_reducers(
    logs: tuple[Path, Path], scorer: str
) -> None:
    log = read(logs[0])
    df = from_inspect(logs[0], scorer=scorer)
    assert len(df) == 16 and df.groupby("task").size().eq(4).all()
    reducers = {(r.scorer, r.reducer): r for r in log.reductions}
    checked = 0
    for reducer, metric in [
        ("pass_at_1", "pass@k"),
        ("pass_at_2", "pass@k"),
        ("pass_at_3", "pass@k"),
        ("pass_k_2", "pass^k"),
        ("pass_k_3", "pass^k"),
    ]:
        k = int(reducer[-1])
        ours = summarize(df, k=k, by="task", n_boot=0).set_index("task")[metric]
        theirs = {str(s.sample_id): s.value for s in reducers[(scorer, reducer)].samples}
        assert sorted(theirs) == sorted(ours.index)
        for task, value in theirs.items():
            assert ours[task] == pytest.approx(value, abs=1e-12), (scorer, reducer, task)
            checked += 1
        # and the headline: inspect's accuracy of the reduced scores is our mean over tasks
        [score] = [s for s in log.results.scores if s.scorer == scorer and s.reducer == reducer]
        overall = summarize(df, k=k, by=(), n_boot=0).iloc[0][metric]
        assert overall == pytest.approx(score.metrics["accuracy"].value, abs=1e-12)
    assert checked == 20
    # the values are not all 0 or 1: the comparison has teeth
    assert {round(v, 4) for v in summarize(df, k=2, by="task", n_boot=0)["pass@k"]} == {0.0, 0.5, 1.0}


@pytest.mark.slow
def test_one_record_per_sample_and_epoch_with_the_log_header(logs: tuple[Path, Path]) -> None:
    log = read(logs[0])
    df = from_inspect(logs[0], scorer="pattern")
    assert list(df.columns) == list(COLUMNS)
    assert df[["task", "trial"]].values.tolist() == [[t, e] for t in ["4", "a", "b", "c"] for e in range(4)]
    for task, pattern in PATTERNS.items():  # trial = epoch - 1, exactly as the scorer saw it
        assert df[df["task"] == task]["passed"].tolist() == [ch == "C" for ch in pattern]
    assert (df["outcome"] == np.where(df["passed"], "pass", "wrong_output")).all()
    assert (df["suite"] == "tiny").all() and (df["model"] == "mockllm/model").all()
    assert (df["provider"] == "inspect_ai").all()
    assert set(df["run_id"]) == {content_id(["inspect_ai", log.eval.eval_id, log.eval.run_id])}
    assert (df["input_tokens"] == 10).all() and (df["output_tokens"] == 2).all()
    assert (df["prompt_hash"] == "").all() and (df["prompt_name"] == "").all()
    assert (df["n_turns"] == 1).all() and (df["latency_s"] > 0).all() and df["started_at"].notna().all()
    match = from_inspect(logs[0], scorer="match")  # the mock replies, scored by match()
    assert match.groupby("task")["passed"].sum().to_dict() == {"4": 1, "a": 3, "b": 0, "c": 4}
    assert set(match["final_answer"]) == {"x", "y"}
    assert from_inspect(logs[0], scorer="match", model="mine")["model"].eq("mine").all()


def test_a_metadata_key_is_the_task_family(logs: tuple[Path, Path]) -> None:
    """family= reads each sample's metadata key (inspect's stderr(cluster=)) into task_family; a key
    a sample lacks is refused; without it every sample is its own family."""
    df = from_inspect(logs[0], scorer="pattern", family="pattern")
    assert df.groupby("task")["task_family"].first().to_dict() == PATTERNS
    assert (from_inspect(logs[0], scorer="pattern")["task_family"] == "").all()
    with pytest.raises(ImportFormatError, match="metadata has no 'domain'"):
        from_inspect(logs[0], scorer="pattern", family="domain")


@pytest.mark.slow
def test_json_logs_folders_and_several_tasks(logs: tuple[Path, Path]) -> None:
    alone = from_inspect(logs[1])  # .json format; one scorer: no scorer= needed
    assert sorted(alone["task"].unique()) == ["a", "b"] and (alone["suite"] == "other").all()
    assert alone["trial"].tolist() == [0, 1, 0, 1]
    assert alone["passed"].tolist() == [True, False, False, False]  # replies x, y / y, y
    assert (alone["n_turns"] == 2).all() and (alone["n_tool_calls"] == 1).all()  # a tool call, then the reply
    assert alone["n_tool_errors"].tolist() == [0, 0, 1, 1]  # sample b asks for a missing key
    entries = json.loads(alone.loc[2, "transcript"])
    assert [e["kind"] for e in entries] == ["task", "reply", "tool_result", "reply"]
    assert (
        entries[1]["action"] == {"tool": "lookup", "args": {"key": "missing"}} and entries[2]["error"] is True
    )
    assert entries[2]["tool"] == "lookup" and entries[3]["action"] == {"answer": "y"}
    assert "no such key" in entries[2]["content"]
    both = from_inspect(logs[0].parent, scorer="match")  # the folder: both logs
    assert both["run_id"].nunique() == 2  # two logs are never pooled
    assert len(both) == 16 + 4
    assert set(both[both["suite"] == "other"]["task"]) == {"other/a", "other/b"}  # two tasks: prefixed
    assert set(both[both["suite"] == "tiny"]["task"]) == {"tiny/a", "tiny/b", "tiny/c", "tiny/4"}
    listed = from_inspect([logs[0], read(logs[1])], scorer="match")  # a list of paths and EvalLogs
    assert sorted(listed["task"]) == sorted(both["task"])
    with warnings.catch_warnings():  # 4 epochs in one log, 2 in the other: no warning (not one run)
        warnings.simplefilter("error")
        from_inspect(logs[0].parent, scorer="match")


@pytest.mark.slow
def test_choosing_a_scorer_and_mapping_values(logs: tuple[Path, Path]) -> None:
    with pytest.raises(
        ValueError, match=r"3 scorers \['match', 'pattern', 'numeric'\]: choose one with scorer="
    ):
        from_inspect(logs[0])
    with pytest.raises(ValueError, match=r"no 'exact' scores .* its scorers are \['match'"):
        from_inspect(logs[0], scorer="exact")
    with pytest.raises(
        ValueError, match=r"gave values \['0.25', '0.5', '0.75'\] .* value_map= .* threshold="
    ):
        from_inspect(logs[0], scorer="numeric")  # 1.0 is understood; the others are not
    df = from_inspect(logs[0], scorer="numeric", threshold=0.5)  # epoch / 4 >= 0.5: epochs 2..4
    assert df.groupby("trial")["passed"].all().tolist() == [False, True, True, True]
    assert not df.groupby("trial")["passed"].any().iloc[0]
    mapped = from_inspect(logs[0], scorer="numeric", value_map={0.25: False, 0.5: False, 0.75: True})
    assert mapped.groupby("trial")["passed"].all().tolist() == [False, False, True, True]
    inverted = from_inspect(logs[0], scorer="match", value_map={"C": False, "I": True})
    assert (inverted["passed"] != from_inspect(logs[0], scorer="match")["passed"]).all()


@pytest.mark.slow
def test_missing_scores_duplicates_and_errored_samples(logs: tuple[Path, Path]) -> None:
    log = read(logs[1])
    position = {(str(s.id), s.epoch): i for i, s in enumerate(log.samples)}[("a", 2)]
    unscored = log.model_copy(deep=True)
    unscored.samples[position].scores = {}
    with pytest.raises(ValueError, match=r"1 sample epochs .* no 'match' score \(e.g. sample 'a' epoch 2\)"):
        from_inspect(unscored)
    twice = log.model_copy(deep=True)
    twice.samples.append(twice.samples[0])
    with pytest.raises(ValueError, match=r"sample 'a' epoch 1 more than once"):
        from_inspect(twice)
    errored = log.model_copy(deep=True)
    from inspect_ai.log import EvalError

    errored.samples[position].scores = None
    errored.samples[position].error = EvalError(
        message="RateLimitError: slow down", traceback="", traceback_ansi=""
    )
    df = from_inspect(errored)
    row = df[(df["task"] == "a") & (df["trial"] == 1)].iloc[0]
    assert row["outcome"] == "infra_error" and not row["passed"] and "RateLimitError" in row["error"]
    assert summarize(df, k=1, by=(), n_boot=0).iloc[0]["n_infra_excluded"] == 1
    unfinished = log.model_copy(update={"status": "cancelled"})
    with pytest.warns(UserWarning, match="status 'cancelled'"):
        from_inspect(unfinished)
    short = log.model_copy(deep=True)
    short.samples = short.samples[:-1]
    with pytest.warns(UserWarning, match="fewer epochs"):
        from_inspect(short)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_inspect(log)  # a complete log: no warning


def test_a_clear_error_names_the_extra_when_inspect_ai_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # import inspect_ai.log fails
    with pytest.raises(
        ImportError, match=r"inspect_ai, which is not installed: pip install \"passk-nb\[inspect\]\""
    ):
        from_inspect(tmp_path)


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    require(HAVE_INSPECT, "inspect_ai (pip install -e '.[inspect]')")
    with pytest.raises(ValueError, match="no inspect_ai logs"):
        from_inspect(tmp_path)
    with pytest.raises(FileNotFoundError, match="no inspect_ai log at"):
        from_inspect(tmp_path / "nope.eval")
    with pytest.raises(TypeError, match="got int"):
        from_inspect(3)
    with pytest.raises(ValueError, match="empty list"):
        from_inspect([])


@pytest.mark.slow
def test_partial_credit_several_part_scores_and_logs_without_samples(logs: tuple[Path, Path]) -> None:
    from inspect_ai.scorer import Score

    log = read(logs[1])
    partial = log.model_copy(deep=True)
    partial.samples[0].scores = {"match": Score(value="P")}  # inspect's PARTIAL
    with pytest.raises(ValueError, match=r"gave values \[\"'P'\"\] .* value_map="):
        from_inspect(partial)
    assert from_inspect(partial, value_map={"P": True})["passed"].tolist() == [True, False, False, False]
    assert not from_inspect(partial, value_map={"P": False})["passed"].any()
    booleans = log.model_copy(deep=True)
    for sample in booleans.samples:
        sample.scores = {"match": Score(value=sample.scores["match"].value == "C")}
    assert from_inspect(booleans)["passed"].tolist() == from_inspect(log)["passed"].tolist()
    several = log.model_copy(deep=True)
    several.samples[0].scores = {"match": Score(value={"accuracy": 1, "f1": 0.5})}
    with pytest.raises(ValueError, match=r"several parts \(\['accuracy', 'f1'\]\) are not supported"):
        from_inspect(several)
    with pytest.raises(ValueError, match="holds no samples .* header_only"):
        from_inspect(log.model_copy(update={"samples": None}))
    no_usage = log.model_copy(deep=True)
    for sample in no_usage.samples:
        sample.model_usage = {}
    assert from_inspect(no_usage)["input_tokens"].isna().all()


# --- the conversation: actions, the answer, honest fields, the transcript browser -------------------


def log_actions(sample: Any) -> list[str]:
    """The action labels of one sample, read from the inspect log itself (not through the importer):
    each tool call ``tool(arg=JSON, ...)`` (``<format error>`` when inspect could not parse it),
    then ``answer`` when the last assistant message calls no tool."""
    labels = []
    agent = [m for m in sample.messages if m.role == "assistant"]
    for message in agent:
        for call in message.tool_calls or []:
            shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(call.arguments.items()))
            labels.append("<format error>" if call.parse_error else f"{call.function}({shown})")
    return labels + (["answer"] if agent and not agent[-1].tool_calls else [])


@pytest.mark.slow
def test_action_sequences_are_the_tool_calls_in_the_log(logs: tuple[Path, Path], desk: Path) -> None:
    from passk_nb.stats.divergence import action_sequence

    checked = 0
    for path, scorer in [(logs[0], "match"), (logs[1], None), (desk, None)]:
        df = from_inspect(path, scorer=scorer).set_index(["task", "trial"])
        for sample in read(path).samples:
            row = df.loc[(str(sample.id), sample.epoch - 1)]
            assert action_sequence(row["transcript"]) == log_actions(sample)
            calls = [c for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
            assert row["n_tool_calls"] == len(calls)
            assert row["n_format_errors"] == sum(bool(c.parse_error) for c in calls)
            checked += 1
    assert checked == 16 + 4 + 4
    # the desk's conversation, spelled out: two finds, the garbled call, the cancel, the answer
    df = from_inspect(desk)
    keys = [json.loads(t)[1]["action"]["args"]["key"] for t in df["transcript"]]
    assert sorted(keys) == ["k1", "k1", "k2", "k2"]  # alternating over the four conversations
    for key, transcript in zip(keys, df["transcript"], strict=True):
        assert action_sequence(transcript) == [
            f'find(key="{key}")',
            'find(key="<script>alert(1)</script>")',
            "<format error>",
            f'cancel(key="{key}")',
            "answer",
        ]
    assert df["passed"].tolist() == [key == "k1" for key in keys]


@pytest.mark.slow
def test_the_last_assistant_text_is_the_answer(logs: tuple[Path, Path], desk: Path) -> None:
    df = from_inspect(desk)
    log = read(desk)
    for sample in log.samples:
        row = df[df["trial"] == sample.epoch - 1].iloc[0]
        last = [m for m in sample.messages if m.role == "assistant"][-1]
        assert isinstance(last.content, list)  # a list of content parts: its text is the answer
        assert row["final_answer"] == last.text == sample.output.completion
        assert row["final_answer"] in ("Cancelled <i>k1</i> & done.", "Cancelled <i>k2</i> & done.")
        replies = [e for e in json.loads(row["transcript"]) if e["kind"] == "reply"]
        assert replies[-1]["action"] == {"answer": last.text}
        assert sum("answer" in (e.get("action") or {}) for e in replies) == 1
    tiny = from_inspect(logs[0], scorer="match")
    for transcript, answer in zip(tiny["transcript"], tiny["final_answer"], strict=True):
        assert [e.get("action") for e in json.loads(transcript)] == [None, {"answer": answer}]


@pytest.mark.slow
def test_record_fields_say_what_the_log_holds(logs: tuple[Path, Path], desk: Path) -> None:
    df = from_inspect(desk)
    # inspect calls tools through the model API; the run set temperature 0.5
    assert set(df["protocol"]) == {"native"} and set(df["json_mode"]) == {"off"}
    assert set(df["temperature"]) == {0.5} and set(df["config"]) == {"temperature=0.5, protocol=native"}
    # no final state and no claim check: null, not "[]" (no change / checked, none found)
    assert df["state_diff"].isna().all() and df["false_claims"].isna().all()
    # two finds + the garbled cancel + the cancel; the script's key and the garbled call fail
    assert (df["n_turns"] == 4).all() and (df["n_tool_calls"] == 4).all()
    assert (df["n_format_errors"] == 1).all() and (df["n_tool_errors"] == 2).all()
    results = [e for e in json.loads(df.loc[0, "transcript"]) if e["kind"] == "tool_result"]
    assert [(e["tool"], e["error"]) for e in results] == [
        ("find", False),
        ("find", True),
        ("cancel", True),
        ("cancel", False),
    ]
    assert "no record <script>" in results[1]["content"]
    other = from_inspect(logs[1])  # the tool-using task: native, at inspect's default temperature
    assert set(other["protocol"]) == {"native"} and set(other["config"]) == {"protocol=native"}
    tiny = from_inspect(logs[0], scorer="match")  # no tools at all: the model answered in text
    assert set(tiny["protocol"]) == {"text"} and set(tiny["config"]) == {"protocol=text"}
    assert tiny["temperature"].isna().all()
    assert tiny["state_diff"].isna().all() and tiny["false_claims"].isna().all()


@pytest.mark.slow
def test_tools_offered_but_not_called_is_still_native(logs: tuple[Path, Path]) -> None:
    log = read(logs[1])
    assert any(e.event == "model" and e.tools for s in log.samples for e in s.events)
    quiet = log.model_copy(deep=True)  # the same run, had the model never called a tool
    for sample in quiet.samples:
        sample.messages = [m for m in sample.messages if m.role == "user"] + [sample.messages[-1]]
        assert not sample.messages[-1].tool_calls
    assert set(from_inspect(quiet)["protocol"]) == {"native"}  # the model calls were given tools
    for sample in quiet.samples:
        sample.events = []
    assert set(from_inspect(quiet)["protocol"]) == {"text"}  # nothing says tools were there


@pytest.mark.slow
def test_divergence_finds_where_failing_epochs_leave_the_passing_ones(desk: Path) -> None:
    from passk_nb.stats.divergence import divergence

    found = divergence(from_inspect(desk))
    assert len(found) == 1
    row = found.iloc[0]
    assert (row["step"], row["action"], row["n_diverging"]) == (0, 'find(key="k2")', 2)
    assert row["reference"] == 'find(key="k1") ×2'


@pytest.mark.slow
def test_the_transcript_browser_shows_the_conversation_escaped(desk: Path) -> None:
    from passk_nb.view.transcript_html import transcript_html

    df = from_inspect(desk)
    page = transcript_html(df.iloc[0])
    assert "<b>find</b>" in page and "<b>cancel</b>" in page  # the calls, as actions
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert "Cancel my &lt;u&gt;record&lt;/u&gt;" in page and "<u>" not in page  # the customer's message
    assert "Looking &lt;b&gt;both&lt;/b&gt; up." in page  # the reply's own text, in the raw reply
    assert "Cancelled &lt;i&gt;k" in page and "<i>k" not in page and "&amp; done." in page
    assert "<b>format error</b>: the arguments of cancel could not be parsed" in page
    assert "<b>tool error</b>" in page and "no record &lt;script&gt;" in page
    assert "<b>final state</b>: <i>not recorded</i>" in page  # not "no change"
    assert "claimed but not done" not in page
