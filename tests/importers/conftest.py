"""Shared fixtures of the importer tests: a small real inspect_ai log, written by inspect_ai."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.fake_servers import require

HAVE_INSPECT = importlib.util.find_spec("inspect_ai") is not None

#: Two samples over two epochs: "a" passes both, "b" passes its second (target "x").
SMALL_LOG = textwrap.dedent(
    """
    import collections, sys
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    REPLIES = {"qa": "xx", "qb": "yx"}
    calls = collections.Counter()

    def outputs(input, tools, tool_choice, config):
        question = input[-1].text
        out = ModelOutput.from_content(model="mockllm", content=REPLIES[question][calls[question]])
        calls[question] += 1
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)  # no tokenizer
        return out

    task = Task(name="small", dataset=[Sample(id=i, input="q" + i, target="x") for i in "ab"],
                solver=generate(), scorer=match(), epochs=2)
    for fmt in ("eval", "json"):
        calls.clear()
        [log] = eval(task, model=get_model("mockllm/model", custom_outputs=outputs),
                     log_dir=sys.argv[1] + "/" + fmt, log_format=fmt, display="none")
        assert log.status == "success", log.error
        print(log.location)
    """
)


@pytest.fixture(scope="session")
def small_inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(an .eval log, a .json log) of task 'small', each alone in its folder, written by inspect_ai
    in a subprocess with its mock model (no network)."""
    require(HAVE_INSPECT, "inspect_ai (pip install -e '.[inspect]')")
    root = tmp_path_factory.mktemp("small_inspect")
    script = root / "write_small_logs.py"
    script.write_text(SMALL_LOG, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
    env.update({"INSPECT_LOG_DIR": str(root), "NO_COLOR": "1"})
    done = subprocess.run(
        [sys.executable, str(script), str(root)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    eval_log, json_log = (Path(line.removeprefix("file://")) for line in done.stdout.split())
    return eval_log, json_log
