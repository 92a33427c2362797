"""Exporters: trial records written in other tools' formats (inspect_ai logs, ...).

Each exporter takes records (:mod:`passk_nb.data.records` columns) and writes or emits them
for another tool; every number it writes is a column of the records or a value a
:mod:`passk_nb.stats` function returned. Exporters may import ``data`` and ``stats``, never
the harness.

>>> import passk_nb.exporters as exporters
>>> exporters.__all__
['to_inspect', 'to_otel', 'log_mlflow']

The names load on first use: ``import passk_nb.exporters`` loads none of those tools.
"""

from passk_nb._lazy import lazy_face

_NAMES = {
    "to_inspect": "passk_nb.exporters.inspect_ai",
    "to_otel": "passk_nb.exporters.otel",
    "log_mlflow": "passk_nb.exporters.mlflow_runs",
}

__all__ = [*_NAMES]
__getattr__ = lazy_face(__name__, _NAMES)
