"""The runner's speed work (issue 50) changes no record: the same seeded runs, an HTTP one against
the fake OpenAI-compatible server (faults drawn from each request: a 400, token counts, a refusal)
and a scripted one (passes, wrong states, format errors), give the records the code gave before,
field for field, but for when and how long (:data:`tests.harness.golden_run.VOLATILE`).

``data/golden_records.jsonl`` was written by the code at commit 2741dec (before issue 50) running
``python -m tests.harness.golden_run`` from a worktree of that commit. Columns added since by other
features (:data:`ADDED`) are new fields, not changed ones: every field the code before wrote must
be the same.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.golden_run import records

GOLDEN = Path(__file__).parent / "data" / "golden_records.jsonl"
#: Record columns added after 2741dec by other issues (their own tests check them).
ADDED = {"severity", "task_family", "confidence"}


def test_the_records_of_a_seeded_http_and_scripted_run_are_those_of_the_code_before():
    before = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    now = [json.loads(json.dumps(row, sort_keys=True, default=str)) for row in records()]
    assert len(now) == len(before) == 50
    for old, new in zip(before, now, strict=True):
        assert (new["task"], new["trial"]) == (old["task"], old["trial"])
        changed = {k: v for k, v in new.items() if k not in ADDED and old.get(k) != v}
        assert changed == {}, (new["task"], new["trial"])
        assert new.keys() - ADDED == old.keys()
