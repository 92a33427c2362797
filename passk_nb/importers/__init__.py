"""importers: other runners' trials as passk records, one ``from_<source>()`` per format, each
returning the same columns (:mod:`passk_nb.data.records`) so every analysis reads them.

>>> import pandas as pd, passk_nb.importers as importers
>>> theirs = pd.DataFrame({"case": ["a", "a", "b", "b"], "ok": [True, False, True, True]})
>>> df = importers.from_frame(theirs, task="case", passed="ok", model="m")
>>> df["outcome"].tolist()
['pass', 'wrong_output', 'pass', 'pass']

The names load on first use: ``import passk_nb.importers`` loads no reader.
"""

from passk_nb._lazy import lazy_face

_NAMES = {
    # one per source
    "from_tau_bench": "passk_nb.importers.tau_bench",
    "from_inspect": "passk_nb.importers.inspect_ai",
    "from_harbor": "passk_nb.importers.harbor",
    "from_frame": "passk_nb.importers.frame",
    # what a malformed file raises
    "ImportFormatError": "passk_nb.importers.checks",
}

__all__ = [*_NAMES]
__getattr__ = lazy_face(__name__, _NAMES)
