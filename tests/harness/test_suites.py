"""Writing a suite: typed tools, declarative tasks, check-suite; the bank desk built on it."""

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

import passk_nb
from passk_nb.cli.main import main
from passk_nb.harness.episode import run_episode
from passk_nb.harness.suites import get_suite
from passk_nb.harness.suites.base import Refusal, Verdict
from passk_nb.harness.suites.build import answer, call, make_suite, task, tool
from passk_nb.harness.suites.checks import check_suite

BANK = get_suite("bank")


@pytest.mark.parametrize("name", ["orders", "bank", "starter", "starter2"])
def test_the_built_in_suites_pass_every_check(name):
    assert check_suite(get_suite(name)) == []


def test_the_bank_desk_has_ten_tasks_the_script_passes_and_doing_nothing_fails(tmp_path):
    assert len(BANK.tasks) == 10
    good = passk_nb.run("scripted", suite="bank", trials=1, out=tmp_path, progress=False)
    assert good["passed"].all(), good[["task", "outcome", "error"]].to_string()
    idle = passk_nb.run(lambda m: '{"answer": "Done."}', suite="bank", trials=1, out=tmp_path, progress=False)
    assert not idle["passed"].any()


def replay(*steps):
    texts = [json.dumps(s) for s in steps]
    return lambda messages: texts[sum(m["role"] == "assistant" for m in messages)]


@pytest.mark.parametrize(
    ("task_id", "steps", "outcome"),
    [
        # the duplicate-payment trap: paying City Power again
        (
            "duplicate-bill-refusal",
            [call("pay_bill", account_id="A101", payee="City Power", amount=84.2), answer("Paid.")],
            "unrequested_change",
        ),
        # splitting around the daily limit: the first half goes through, and that is already wrong
        (
            "daily-limit-refusal",
            [
                call("transfer", from_account="A107", to_account="A104", amount=500.0),
                answer("Sent 500 today."),
            ],
            "unrequested_change",
        ),
        # the wrong Sam Lee
        (
            "same-name-disambiguation",
            [call("freeze_account", account_id="A105"), answer("Frozen.")],
            "wrong_state",
        ),
        # a looked-up refusal that still claims the transfer happened
        (
            "over-cap-to-another-refusal",
            [call("get_account", account_id="A104"), answer("I have transferred 800 to A104.")],
            "false_claim",
        ),
    ],
)
def test_the_bank_traps_catch_the_classic_mistakes(task_id, steps, outcome):
    result = run_episode(
        BANK,
        BANK.task(task_id),
        passk_nb.harness.make_provider(replay(*steps)),
        system_prompt=BANK.prompts["default"],
    )
    assert result["outcome"] == outcome, result["error"]


def test_tools_come_from_typed_functions_with_docstring_descriptions():
    def move(state, note_id: str, folder: str, priority: int) -> dict:
        """Move a note into a folder.

        note_id: the note to move
        """
        return {}

    built = tool(move)
    assert built.description == "Move a note into a folder"
    assert {name: p.type for name, p in built.params.items()} == {
        "note_id": "string",
        "folder": "string",
        "priority": "number",
    }
    assert built.params["note_id"].description == "the note to move"

    def untyped(state, note_id):
        return {}

    with pytest.raises(TypeError, match="annotate argument 'note_id' as str, float or int"):
        tool(untyped)


def notes_suite(**task_options):
    def archive(state, note_id: str) -> dict:
        """Archive a note."""
        state["notes"][note_id]["archived"] = True
        return {"archived": note_id}

    def crash(state, note_id: str) -> dict:
        """A tool with a bug."""
        raise RuntimeError("bug")

    options = {
        "expect": {"notes.N1.archived": True},
        "script": [call("archive", note_id="N1"), answer("Archived.")],
        **task_options,
    }
    return make_suite(
        "notes",
        instructions="You manage notes.",
        tools=[archive, crash],
        initial_state=lambda: {"notes": {"N1": {"archived": False}}},
        tasks=[task("archive-n1", "Archive N1.", **options)],
    )


def test_check_suite_names_each_kind_of_problem():
    problems = check_suite(notes_suite(script=[answer("Archived.")], expect={"notes.N1.archived": False}))
    text = "\n".join(problems)
    assert "its known-good script ends as 'wrong_state'" in text
    assert "tool 'crash' raised RuntimeError" in text
    lenient = check_suite(
        notes_suite(
            expect=None,
            check=lambda before, after: passk_nb.harness.suites.base.Verdict("pass", "anything goes"),
        )
    )
    assert any("an agent that does nothing passes it" in p for p in lenient)


def test_task_and_suite_definitions_are_validated():
    with pytest.raises(ValueError, match="exactly one of expect=, check= or refusal="):
        task("t", "p", script=[answer("x")])
    with pytest.raises(ValueError, match="give claims="):
        make_suite(
            "s",
            instructions="i",
            tools=[],
            initial_state=dict,
            tasks=[task("t", "p", refusal=Refusal("R1", ("x",)), script=[answer("no")])],
        )


def test_a_suite_from_your_own_module_runs_from_the_cli(tmp_path, monkeypatch, capsys):
    module = tmp_path / "my_notes.py"
    module.write_text(
        textwrap.dedent('''
        from passk_nb.harness.suites.build import answer, call, make_suite, task

        def archive(state, note_id: str) -> dict:
            """Archive a note."""
            state["notes"][note_id]["archived"] = True
            return {"archived": note_id}

        SUITE = make_suite(
            "my-notes", instructions="You manage notes.", tools=[archive],
            initial_state=lambda: {"notes": {"N1": {"archived": False}}},
            tasks=[task("archive-n1", "Archive N1.", expect={"notes.N1.archived": True},
                        script=[call("archive", note_id="N1"), answer("Archived N1.")])],
        )
    ''')
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert main(["check-suite", "my_notes:SUITE"]) == 0
    assert "pass every check" in capsys.readouterr().out
    assert get_suite("my_notes:SUITE").name == "my-notes"
    df = passk_nb.run("scripted", suite="my_notes:SUITE", trials=2, out=tmp_path / "runs", progress=False)
    assert df["passed"].all() and set(df["suite"]) == {"my-notes"}
    with pytest.raises(ValueError, match="has no 'NOPE'"):
        get_suite("my_notes:NOPE")


BROKEN = """from passk_nb.harness.suites import get_suite

SUITE = get_suite("orders")
RATE = 1 / 0
"""


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("broken_mod.py", BROKEN, "broken_mod.py:4: division by zero"),
        ("unclosed_mod.py", "SUITE = [\n", "unclosed_mod.py:1:"),
        ("needs_dep.py", "import no_such_dependency_xyz\n", "needs_dep.py:1: No module named"),
    ],
)
@pytest.mark.parametrize("spelling", ["{stem}:SUITE", "./{name}:SUITE"])
def test_a_suite_module_that_raises_is_named_with_file_and_line(
    tmp_path, monkeypatch, name, text, where, spelling
):
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"raised \w+ at " + re.escape(where)) as caught:
        get_suite(spelling.format(stem=name[:-3], name=name))
    assert "\n" not in str(caught.value)


def test_a_missing_suite_name_lists_the_suites_the_module_holds(tmp_path, monkeypatch):
    (tmp_path / "two_suites.py").write_text(
        "from passk_nb.harness.suites import get_suite\n"
        "SUITE = get_suite('orders')\nBANK = get_suite('bank')\n"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"'two_suites' has no 'SUIT'; its Suite objects: SUITE, BANK"):
        get_suite("two_suites:SUIT")


def test_the_guide_suite_example_runs_as_written(tmp_path):
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "suites.md").read_text(encoding="utf-8")
    section = guide.split("## More suites, and your own", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "suites.md", "exec"), namespace)
    assert check_suite(namespace["SUITE"]) == []
    df = passk_nb.run("scripted", suite=namespace["SUITE"], trials=1, out=tmp_path, progress=False)
    assert df["outcome"].tolist() == ["pass"]


def _ticket_suite(status="closed", *, doc="Close a ticket.", script=None, **task_options):
    """A one-task suite; ``task_options`` replace its ``expect`` (e.g. ``check=``)."""

    def close_ticket(state, ticket_id: str) -> dict:
        state["tickets"][ticket_id]["status"] = "closed"
        return {"closed": ticket_id}

    close_ticket.__doc__ = doc
    return make_suite(
        "tickets",
        instructions="You close support tickets.",
        tools=[close_ticket],
        initial_state=lambda: {"tickets": {"T1": {"status": "open"}}},
        tasks=[
            task(
                "close-t1",
                "Please close ticket T1.",
                script=script or [call("close_ticket", ticket_id="T1"), answer("Closed T1.")],
                **(task_options or {"expect": {"tickets.T1.status": status}}),
            )
        ],
    )


def test_an_edited_suite_is_a_new_run_and_says_why(tmp_path):
    import warnings

    old = passk_nb.run("scripted", suite=_ticket_suite("Closed"), trials=2, out=tmp_path, progress=False)
    assert set(old["outcome"]) == {"wrong_state"}
    with pytest.warns(UserWarning, match="suite 'tickets' changed since the runs in .* resumes none"):
        new = passk_nb.run("scripted", suite=_ticket_suite("closed"), trials=2, out=tmp_path, progress=False)
    assert set(new["outcome"]) == {"pass"} and new["run_id"].iloc[0] != old["run_id"].iloc[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same suite again: resumes, no warning
        same = passk_nb.run("scripted", suite=_ticket_suite("closed"), trials=2, out=tmp_path, progress=False)
    assert same["run_id"].iloc[0] == new["run_id"].iloc[0]


def test_the_suite_fingerprint_sees_checks_tools_prompts_and_state():
    from passk_nb.harness.fingerprint import suite_fingerprint

    base = suite_fingerprint(_ticket_suite("closed"))
    assert suite_fingerprint(_ticket_suite("closed")) == base
    assert suite_fingerprint(_ticket_suite("Closed")) != base  # an expect value
    assert suite_fingerprint(_ticket_suite("closed", doc="Shut a ticket.")) != base  # a tool's description
    orders = passk_nb.get_suite("orders")
    from dataclasses import replace

    edited_task = replace(orders.tasks[0], prompt=orders.tasks[0].prompt + " Thanks.")
    edited = replace(orders, tasks=(edited_task, *orders.tasks[1:]))
    assert suite_fingerprint(edited) != suite_fingerprint(orders)
    more = replace(orders, initial_state=lambda: {**orders.initial_state(), "extra": 1})
    assert suite_fingerprint(more) != suite_fingerprint(orders)


def test_a_script_calling_a_missing_tool_or_wrong_argument_is_refused_when_the_suite_is_built():
    with pytest.raises(
        ValueError, match=r"task 'close-t1', script step 1 calls unknown tool 'close_tiket'.*close_ticket"
    ):
        _ticket_suite(script=[call("close_tiket", ticket_id="T1"), answer("Closed.")])
    with pytest.raises(
        ValueError, match=r"close_ticket\(ticket_id: string\) with missing 'ticket_id', unexpected 'id'"
    ):
        _ticket_suite(script=[call("close_ticket", id="T1"), answer("Closed.")])


def test_check_suite_says_why_a_known_good_script_fails(capsys, tmp_path, monkeypatch):
    suite = _ticket_suite("closed", expect={"tickets.T1.stauts": "closed"})  # a typo in the path
    problems = check_suite(suite)
    assert "ends as 'wrong_state', not 'pass': tickets.T1.stauts was not changed" in problems[0]


def test_a_check_may_return_a_bool_and_a_made_up_outcome_names_the_task(tmp_path):
    def closed(before, after):
        return after["tickets"]["T1"]["status"] == "closed"

    suite = _ticket_suite(check=closed)
    assert check_suite(suite) == []
    df = passk_nb.run("scripted", suite=suite, trials=1, out=tmp_path, progress=False)
    assert df["outcome"].tolist() == ["pass"]

    def made_up(before, after):
        return Verdict("passed", "looks fine")

    bad = _ticket_suite(check=made_up)
    message = (
        r"suite 'tickets', task 'close-t1': its check returned the outcome 'passed', which is not one of"
    )
    assert any(re.search(message, p) for p in check_suite(bad))
    with pytest.raises(ValueError, match=message):
        passk_nb.run("scripted", suite=bad, trials=1, out=tmp_path / "bad", progress=False)


def test_one_import_builds_a_suite():
    import passk_nb.harness.suites as suites

    for name in ("make_suite", "task", "tool", "call", "answer", "Refusal", "Verdict", "ClaimVocabulary"):
        assert hasattr(suites, name), name
    assert suites.check_suite(BANK) == []


def test_a_task_family_is_recorded_and_is_the_unit_of_cluster(tmp_path):
    """A task's declared family reaches every record (``task_family``), is no part of the suite's
    identity, and summarize(cluster="task_family") counts its families; tasks without one are
    families of their own."""
    from passk_nb.harness.fingerprint import suite_fingerprint

    def close_ticket(state, ticket_id: str) -> dict:
        """Close a ticket."""
        state["tickets"][ticket_id]["status"] = "closed"
        return {"closed": ticket_id}

    def suite(families):
        tickets = [f"T{i}" for i in range(6)]
        return make_suite(
            "tickets",
            instructions="You close support tickets.",
            tools=[close_ticket],
            initial_state=lambda: {"tickets": {t: {"status": "open"} for t in tickets}},
            tasks=[
                task(
                    f"close-{t}",
                    f"Please close ticket {t}.",
                    script=[call("close_ticket", ticket_id=t), answer(f"Closed {t}.")],
                    expect={f"tickets.{t}.status": "closed"},
                    family=family,
                )
                for t, family in zip(tickets, families, strict=True)
            ],
        )

    families = ["a", "a", "b", "b", "", ""]
    assert suite_fingerprint(suite(families)) == suite_fingerprint(suite([""] * 6))
    df = passk_nb.run("scripted", suite=suite(families), trials=2, out=tmp_path, progress=False)
    assert df.groupby("task")["task_family"].first().tolist() == families
    assert passk_nb.load(tmp_path)["task_family"].tolist() == df["task_family"].tolist()
    out = passk_nb.summarize(df, k=1, cluster="task_family")
    assert out["n_clusters"].tolist() == [4] and out["n_tasks"].tolist() == [6]
