"""data: the trial records (one row per trial, typed and described columns) and the parquet
folders they live in, which every analysis and every other layer reads.

>>> import tempfile, passk_nb.data as data
>>> df = data.frame_from_records([{"run_id": "r", "suite": "s", "task": "t", "trial": 0,
...                                "passed": True, "outcome": "pass"}])
>>> list(df.columns) == list(data.COLUMNS), data.OUTCOMES[0]
(True, 'pass')
>>> len(data.load(tempfile.mkdtemp(), strict=False))
0

The names load on first use: ``import passk_nb.data`` loads no pandas.
"""

from passk_nb._lazy import lazy_face

_NAMES = {
    # the records: their columns, outcomes, and a frame of them from dicts
    "COLUMNS": "passk_nb.data.records",
    "DESCRIPTIONS": "passk_nb.data.records",
    "OUTCOMES": "passk_nb.data.records",
    "SEVERITIES": "passk_nb.data.severity",
    "frame_from_records": "passk_nb.data.records",
    "parse_transcript": "passk_nb.data.transcript",
    "prompt_hash": "passk_nb.data.ids",
    # where they live
    "load": "passk_nb.data.store",
    "StoreError": "passk_nb.data.store",
    # what a trial costs at token prices
    "price_table": "passk_nb.data.prices",
    "trial_cost": "passk_nb.data.prices",
    # the claims an agent's final answer makes, checked against the final state
    "Claim": "passk_nb.data.claims",
    "ClaimVocabulary": "passk_nb.data.claims",
}

__all__ = [*_NAMES]
__getattr__ = lazy_face(__name__, _NAMES)
