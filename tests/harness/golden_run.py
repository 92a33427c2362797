"""The seeded runs whose records ``test_records_unchanged.py`` compares with the code's before
issue 50 (``data/golden_records.json``). Run as a script: prints the records as JSON, one per line,
without the fields a run cannot repeat (:data:`VOLATILE`, and each transcript entry's ``latency_s``)."""

from __future__ import annotations

import json
import math
import sys
import tempfile
from typing import Any

import passk_nb
from tests.helpers.fake_servers import FakeServer, Fault

#: Fields that differ between two runs of the same code: when and how long, and where the server was.
VOLATILE = ("started_at", "latency_s", "base_url_host", "run_id", "config", "harness_version")
SCRIPTS = {t.prompt: t.script for t in passk_nb.get_suite("orders").tasks}


def rule(body: dict[str, Any]) -> Fault | None:
    """A fault drawn from the request alone (its trial's seed and turn), so every run is the same."""
    seed, turn = body.get("seed") or 0, len(body["messages"]) // 2
    if seed % 7 == 3 and turn == 1:
        return Fault("status", status=400, body='{"error": "bad request"}')
    if seed % 5 == 1:
        return Fault("usage", size=40 + seed)
    if seed % 11 == 4 and turn == 2:
        return Fault("refusal", body="I cannot help with that.")
    return None


def scripted(messages: list[dict[str, str]]) -> str:
    """Known-good scripts, cut short or broken on some turns: passes, failures and format errors."""
    task, turn = messages[1]["content"], sum(m["role"] == "assistant" for m in messages)
    steps = SCRIPTS[task]
    if len(task) % 3 == 0 and turn == 0:
        return "not json at all"
    if len(task) % 4 == 1:
        return json.dumps({"answer": "done, I think"})  # before doing anything: the check fails
    return json.dumps(steps[min(turn, len(steps) - 1)])


def records() -> list[dict[str, Any]]:
    """The records of both seeded runs, sorted, JSON-ready, without :data:`VOLATILE`."""
    frames = []
    with tempfile.TemporaryDirectory() as out, FakeServer("openai", keep_alive=True, rule=rule) as server:
        frames.append(
            passk_nb.run(
                "openai",
                "golden",
                base_url=server.url,
                api_key_env=None,
                trials=6,
                backend_seed=20,
                concurrency=8,
                out=out,
                progress=False,
                backoff_base=0.01,
                backoff_max=0.02,
            )  # fmt: skip
        )
        frames.append(passk_nb.run(scripted, trials=4, concurrency=4, out=out, progress=False, version="g"))
    rows = []
    for frame in frames:
        for row in frame.sort_values(["task", "trial"]).to_dict("records"):
            row["transcript"] = json.dumps(
                [
                    {k: v for k, v in entry.items() if k != "latency_s"}
                    for entry in json.loads(row["transcript"])
                ]
            )
            rows.append({k: _plain(v) for k, v in row.items() if k not in VOLATILE})
    return rows


def _plain(value: Any) -> Any:
    if value is None or value is getattr(__import__("pandas"), "NA", None):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


if __name__ == "__main__":
    for row in records():
        sys.stdout.write(json.dumps(row, sort_keys=True, default=str) + "\n")
