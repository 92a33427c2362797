"""Exporters: trial records written in other tools' formats (inspect_ai logs, ...).

Each exporter takes records (:mod:`passk_nb.data.records` columns) and writes or emits them
for another tool; every number it writes is a column of the records or a value a
:mod:`passk_nb.stats` function returned. Exporters may import ``data`` and ``stats``, never
the harness.
"""
