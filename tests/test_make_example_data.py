"""scripts/make_example_data.py refuses a pilot into data/ and an empty selection before any server starts."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "make_example_data.py"


@pytest.fixture
def script(monkeypatch):
    spec = importlib.util.spec_from_file_location("make_example_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def no_server(*args, **kwargs):
        raise AssertionError("a server was started")

    monkeypatch.setattr(module, "LlamaServer", no_server)
    return module


def test_a_pilot_is_never_written_into_data(script, capsys):
    with pytest.raises(SystemExit):
        script.main(["--only", "smollm2-starter-pilot"])
    assert "smollm2-starter-pilot is a pilot: give --out outside data/" in capsys.readouterr().err


def test_a_selection_of_no_run_is_refused(script, capsys):
    with pytest.raises(SystemExit):
        script.main(["--only", "smollm2-starter", "--prompt", "fewshot"])
    assert "select no run" in capsys.readouterr().err


def test_the_confirmatory_grid_is_the_pre_registered_one(script):
    grid = [
        (p, o["temperature"], o["backend_seed"], o["max_turns"], n)
        for f, p, o, n in script.RUNS
        if f == "smollm2-starter"
    ]
    assert grid == [
        ("default", 0.7, 1000, 3, 20),
        ("contract", 0.7, 1000, 3, 20),
        ("default", 0.0, 1000, 3, 20),
        ("contract", 0.0, 1000, 3, 20),
    ]
    pilots = {o["backend_seed"] for f, p, o, n in script.RUNS if f in script.PILOTS}
    assert pilots == {0}  # the confirmatory seeds 1000-1019 are new


def test_the_starter2_grid_is_the_pre_registered_one_on_its_own_suite_and_seeds(script):
    grid = [
        (p, o["suite"], o["json_mode"], o["temperature"], o["backend_seed"], o["max_turns"], n)
        for f, p, o, n in script.RUNS
        if f == "smollm2-starter2"
    ]
    assert grid == [
        ("default", "starter2", "schema", 0.7, 2000, 3, 20),
        ("act-first", "starter2", "schema", 0.7, 2000, 3, 20),
        ("default", "starter2", "schema", 0.0, 2000, 3, 20),
        ("act-first", "starter2", "schema", 0.0, 2000, 3, 20),
    ]
    seeds = {o["backend_seed"] for f, p, o, n in script.RUNS if f.startswith("smollm2-starter")}
    assert seeds == {0, 1000, 2000}  # pilots, the starter grid, the starter2 grid: all apart
