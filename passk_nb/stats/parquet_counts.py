"""Per-task counts straight from a folder of parquet records, without loading the trials.

:func:`passk_nb.counts` of a path lands here: :func:`count_folder` returns the table ``counts``
gives for ``load(folder)``, but reads only the columns the counts need. With DuckDB installed
(``pip install "passk-nb[duckdb]"``) the counting runs as SQL over the parquet files, and
DuckDB spills to disk beyond its memory limit, so a dataset larger than memory is counted
too; without it, pandas reads the needed columns (never the transcripts) and counts them.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from passk_nb.data.records import COLUMNS, DEFAULTS, DTYPES, KEY, OUTCOMES
from passk_nb.data.store import SAME_TRIAL, load, part_files, read_consistent, repeated_trials_problem
from passk_nb.stats._grouping import count_trials, group_codes
from passk_nb.stats.checks import COUNTED_OUTCOMES, INFRA_OUTCOME, check_infra, records_by
from passk_nb.stats.params import INFRA, share_docs

#: ``engine=`` choices: "auto" uses DuckDB when it is installed, else pandas.
ENGINES: tuple[str, ...] = ("auto", "duckdb", "pandas")


@share_docs
def count_folder(
    path: str | os.PathLike[str],
    by: str | Sequence[str] | None = None,
    infra: str = INFRA,
    *,
    engine: str = "auto",
) -> pd.DataFrame:
    """:func:`passk_nb.counts` of the records under ``path`` (a folder or one file).

    Equal to ``counts(load(path), by, infra)``, duplicates resolved the way :func:`load`
    resolves them, while reading only the grouping columns, ``task``, ``passed`` and
    ``outcome`` (plus ``run_id`` and ``trial`` to drop duplicate trials).

    path: a data folder (``passk run --out``) or one parquet file.
    {by} Identity columns are those of the record schema.
    {infra}
    engine: "duckdb" counts with SQL over the parquet files (bounded memory; needs the
        ``duckdb`` extra), "pandas" loads the needed columns, "auto" (default) picks DuckDB
        when it is installed.

    >>> import tempfile
    >>> from passk_nb.data.store import write_part
    >>> folder = tempfile.mkdtemp()
    >>> rows = [{"run_id": "r1", "suite": "s", "model": "m", "task": "t", "trial": i,
    ...          "passed": i < 2, "outcome": "pass" if i < 2 else "wrong_state"} for i in range(3)]
    >>> _ = write_part(rows, folder, "r1")
    >>> count_folder(folder, by="model")[["model", "task", "n", "c", "n_wrong_state"]]
      model task  n  c  n_wrong_state
    0     m    t  3  2              1
    >>> by_pandas = count_folder(folder, by="model", engine="pandas")
    >>> by_pandas.equals(count_folder(folder, by="model", engine="duckdb"))
    True
    """
    check_infra(infra)
    by = records_by(by)
    keys = list(dict.fromkeys([*by, "task"]))
    unknown = [col for col in keys if col not in COLUMNS]
    if unknown:
        raise ValueError(f"by={list(by)} names columns trial records do not have: {unknown}")
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(
            f"no records at {str(path)!r}: run `passk run --out {path}` first, or check the path"
        )
    if not root.is_file() and not part_files(root):
        raise ValueError(f"no trial records under {str(path)!r} (no parquet files)")
    if engine == "auto":
        engine = "duckdb" if importlib.util.find_spec("duckdb") else "pandas"
    where = f"records under {str(path)!r}"
    if engine == "pandas":
        return count_trials(load(path, columns=[*keys, "passed", "outcome"]), by, infra)
    if root.is_file():
        return _duckdb_counts([root], keys, infra, where)
    # one consistent set of parts, as load() reads them: listed again when a merge ran meanwhile
    return read_consistent(root, lambda files: _duckdb_counts(files, keys, infra, where))


def _duckdb_counts(files: list[Path], keys: list[str], infra: str, where: str) -> pd.DataFrame:
    try:
        import duckdb
    except ImportError as exc:
        raise ImportError(
            'engine="duckdb" needs DuckDB: pip install "passk-nb[duckdb]" (or use engine="pandas")'
        ) from exc
    try:
        return _duckdb_query(duckdb, files, keys, infra, where)
    except duckdb.IOException as exc:
        gone = [f for f in files if not f.exists()]
        if gone:  # merged away since the listing: read_consistent lists again
            raise FileNotFoundError(f"{gone[0]} vanished while being counted") from exc
        raise


def _duckdb_query(duckdb: Any, files: list[Path], keys: list[str], infra: str, where: str) -> pd.DataFrame:
    with duckdb.connect() as con:
        con.register(
            "files", pd.DataFrame({"file": [str(f) for f in files], "file_order": range(len(files))})
        )
        paths = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
        source = f"read_parquet([{paths}], filename = true, file_row_number = true, union_by_name = true)"
        present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
        needed = list(dict.fromkeys([*keys, *KEY, "passed", "outcome"]))
        compared = [c for c in SAME_TRIAL if c not in KEY]  # what two rows of one trial must agree on

        def column(name: str) -> str:
            default = DEFAULTS.get(name)
            if isinstance(default, str):  # files of an older version lack it: load() fills the default
                literal = "'" + default.replace("'", "''") + "'"
                if name not in present:
                    return f"{literal}::VARCHAR AS {_quote(name)}"
                return f"coalesce({_quote(name)}, {literal}) AS {_quote(name)}"
            if name not in present:  # absent from every file: null, as load() reads it
                return f"NULL::VARCHAR AS {_quote(name)}"
            if DTYPES[name] == "float64":  # pandas groups NaN with null: so must we
                return f"nullif({_quote(name)}, 'NaN'::DOUBLE) AS {_quote(name)}"
            return _quote(name)

        _refuse_wrong_outcomes(con, source, present)
        is_infra = f"coalesce(outcome = '{INFRA_OUTCOME}', false)"
        columns = [column(c) for c in dict.fromkeys([*KEY, *compared])]
        _refuse_repeated_trials(con, source, columns, is_infra, where)
        infra_count = f"count(*) FILTER (WHERE {is_infra})" if infra == "exclude" else "0"
        outcome_counts = "".join(
            f", count(*) FILTER (WHERE outcome = '{name}') AS {_quote('n_' + name)}"
            for name in COUNTED_OUTCOMES
        )
        group = ", ".join(_quote(k) for k in keys)
        query = f"""
            WITH rows AS (
                SELECT {", ".join(column(c) for c in needed)}, file_order, file_row_number
                FROM {source} JOIN files ON filename = file
            ),
            trials AS (  -- one row per (run_id, task, trial): a real outcome before an infra error
                SELECT * FROM rows
                QUALIFY row_number() OVER (
                    PARTITION BY run_id, task, trial ORDER BY {is_infra}, file_order, file_row_number
                ) = 1
            )
            SELECT {group},
                count(*) - {infra_count} AS n,
                count(*) FILTER (WHERE coalesce(passed, false) AND NOT {is_infra}) AS c,
                {infra_count} AS n_infra
                {outcome_counts}
            FROM trials GROUP BY {group}
        """
        frame = con.execute(query).fetchdf()
    frame = frame.astype(
        {**{k: DTYPES[k] for k in keys}, **{c: np.int64 for c in frame.columns[len(keys) :]}}
    )
    gid, _ = group_codes(frame, keys)  # the order counts() gives: sorted keys, missing values last
    return frame.iloc[np.argsort(gid, kind="stable")].reset_index(drop=True)


def _refuse_wrong_outcomes(con: Any, source: str, present: set[str]) -> None:
    """Refuse, as :func:`~passk_nb.data.store.load` does, files holding an outcome passk never
    writes or a ``passed`` that disagrees with it: the first such file is read by ``load``, whose
    error names the file, the row and the fix."""
    if not {"passed", "outcome"} <= present:
        return
    known = ", ".join("'" + name + "'" for name in OUTCOMES)
    bad = con.execute(
        f"""SELECT filename FROM {source}
            WHERE outcome IS NULL OR outcome NOT IN ({known}) OR passed IS NULL
               OR passed <> (outcome = 'pass')
            LIMIT 1"""
    ).fetchone()
    if bad is not None:
        load(bad[0])  # raises the store's message
        raise ValueError(f"{bad[0]} holds records that passk never writes (passed and outcome disagree)")


def _refuse_repeated_trials(con: Any, source: str, columns: list[str], is_infra: str, where: str) -> None:
    """Refuse, as :func:`~passk_nb.data.store.load` does, a trial stored twice with real outcomes
    that differ in an identity column or the outcome (with the store's message)."""
    key = ", ".join(_quote(k) for k in KEY)
    con.execute(
        f"""CREATE TEMP TABLE clash AS
            WITH real AS (SELECT DISTINCT {", ".join(columns)} FROM {source} WHERE NOT {is_infra})
            SELECT {key} FROM real GROUP BY {key} HAVING count(*) > 1"""
    )
    n = con.execute("SELECT count(*) FROM clash").fetchone()[0]
    if not n:
        return
    first = con.execute(
        f"""SELECT DISTINCT {", ".join(columns)} FROM {source}
            WHERE NOT {is_infra} AND ({key}) IN (SELECT ({key}) FROM clash LIMIT 1)"""
    ).fetchdf()
    problem = repeated_trials_problem(first, n=int(n))
    if problem:
        raise ValueError(f"{where}: {problem}")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
