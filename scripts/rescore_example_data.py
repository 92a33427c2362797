"""Re-score the example records in ``data/`` under the current record format and checks.

No model is called: every stored trial is replayed from its transcript against the
suite's seeded initial state (the tools are deterministic, and the replay is checked to
rebuild the stored state diff exactly) and judged again with
:func:`passk_nb.harness.regrade.regrade`. The run spec stored beside each run is
brought to the current format (a three-valued ``json_mode``), which gives the run id
and the ``config`` label that ``scripts/make_example_data.py`` would produce today, so
regenerating resumes these runs.

    python scripts/rescore_example_data.py            # rewrites data/smollm2*, prints what changed

Used on 2026-12-01 when the refusal task started to require a look at the order and an
answer that does not claim the cancellation (issue 11).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from passk_nb.data.records import COLUMNS, DEFAULTS
from passk_nb.data.store import write_part, write_spec
from passk_nb.harness import regrade
from passk_nb.harness.spec import RunSpec, normalize_json_mode

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("data/smollm2", "data/smollm2-schema")


def current_spec(old: dict) -> RunSpec:
    """The stored spec in today's format (json_mode was a bool; schema runs said so in settings)."""
    mode = normalize_json_mode(old["json_mode"])
    if mode == "json" and old.get("settings", {}).get("json_schema"):
        mode = "schema"
    return RunSpec(**{**old, "json_mode": mode})


def rescore_run(run_dir: Path, out_root: Path) -> tuple[str, pd.DataFrame]:
    old_spec = json.loads((run_dir / "_spec.json").read_text())
    spec = current_spec(old_spec)
    rows = []
    for part in sorted(run_dir.glob("part-*.parquet")):
        rows += pq.read_table(part).to_pylist()
    frame = pd.DataFrame(rows)
    frame["json_mode"] = spec.json_mode
    frame["config"] = spec.config
    frame["run_id"] = spec.run_id
    for column in COLUMNS:  # columns added since the records were written: their default, or null
        if column not in frame.columns:
            frame[column] = DEFAULTS.get(column)
    graded = regrade(frame)
    kept = graded[list(COLUMNS)].astype(object)
    records = kept.where(kept.notna(), None).to_dict("records")
    write_part(records, out_root, spec.run_id)
    write_spec(out_root, spec.run_id, asdict(spec))
    return spec.run_id, graded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", nargs="*", default=list(FOLDERS), help="data folders (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    for name in args.folders:
        folder = ROOT / name
        staging = folder.with_name(folder.name + ".rescored")
        shutil.rmtree(staging, ignore_errors=True)
        for run_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
            run_id, graded = rescore_run(run_dir, staging)
            changed = graded[graded["regrade_changed"]]
            print(
                f"{name}/{run_dir.name} -> {run_id} ({graded['config'].iloc[0]}): {len(graded)} trials, "
                f"{int(graded['passed'].sum())} pass, {len(changed)} changed verdict"
            )
            for (before, after), n in changed.groupby(["outcome_before", "outcome"]).size().items():
                print(f"    {before} -> {after}: {n}")
        for kept in (p for p in folder.iterdir() if p.is_file()):  # the README, the licence
            shutil.copy2(kept, staging / kept.name)
        shutil.rmtree(folder)
        staging.rename(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
