"""What a Python agent receives is what the user guide and the callable provider's docstring say."""

import ast
import re
from pathlib import Path

import passk_nb
from passk_nb.harness.providers import function

GUIDE = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "running.md").read_text(encoding="utf-8")
CALL = '{"tool": "get_order", "args": {"order_id": "O1001"}}'


def turns(tmp_path) -> list[list[dict]]:
    """The messages of each turn of an agent that calls a tool, breaks the protocol, then answers."""
    seen: list[list[dict]] = []

    def agent(messages):
        seen.append([dict(m) for m in messages])
        return [CALL, "Sure.", '{"answer": "Refunded."}'][len(seen) - 1]

    passk_nb.run(agent, tasks=["refund-delivered"], trials=1, out=tmp_path, progress=False)
    return seen


def documented_turn() -> list[dict]:
    section = GUIDE.split("**What a Python agent receives.**", 1)[1]
    return ast.literal_eval(section.split("```python\n", 1)[1].split("```", 1)[0])


def matches(documented: str, actual: str) -> bool:
    """Does ``actual`` read as ``documented``, where each ``...`` stands for any text?"""
    pattern = ".*".join(re.escape(part) for part in documented.split("..."))
    return re.fullmatch(pattern, actual, flags=re.DOTALL) is not None


def test_the_guide_shows_the_messages_an_agent_receives(tmp_path):
    first, second, third = turns(tmp_path)
    documented = documented_turn()
    assert (
        [m["role"] for m in second]
        == [m["role"] for m in documented]
        == ["system", "user", "assistant", "user"]
    )
    for doc, got in zip(documented, second, strict=True):
        assert set(got) == {"role", "content"} and matches(doc["content"], got["content"]), (doc, got)
    suite = passk_nb.get_suite("orders")
    assert first == second[:2] and first[1]["content"] == suite.task("refund-delivered").prompt
    assert "Reply protocol" in first[0]["content"] and '{"tool": "<tool name>", "args"' in first[0]["content"]
    # a malformed reply is answered by a user message "Format error: ..."
    assert third[-2:] == [
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": third[-1]["content"]},
    ] and third[-1]["content"].startswith("Format error: ")


def test_the_prose_names_the_roles_and_prefixes_an_agent_sees(tmp_path):
    _, second, third = turns(tmp_path)
    tool_prefix = re.match(r"Tool result \((\w+)\): ", second[3]["content"])
    assert tool_prefix and tool_prefix.group(1) == "get_order"
    for text in (GUIDE, function.__doc__):
        flat = " ".join(text.replace("``", "`").split())
        assert "Tool result (NAME): {" in flat and "Format error: ..." in flat
        assert "system prompt" in flat and "first `user` message" in flat and "**user** message" in flat
    assert second[3]["content"].startswith('Tool result (get_order): {"ok": ')
    assert third[-1]["content"].startswith("Format error: ")
