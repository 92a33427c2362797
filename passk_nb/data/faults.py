"""The vocabulary of tool faults shared by the harness (which injects them) and the analysis.

>>> fault_classes("timeout:get_order,error:*,latency:*:s=1")
['explicit transient', 'explicit permanent', 'latency']
"""

from __future__ import annotations

from passk_nb.data.records import NO_FAULTS

__all__ = ["FAULT_CLASSES", "NO_FAULTS", "fault_classes"]

#: Each fault kind and its class: the 2×2 of explicit/implicit × transient/permanent, plus schema
#: drift and latency (see :mod:`passk_nb.harness.faults` for what each does).
FAULT_CLASSES: dict[str, str] = {
    "timeout": "explicit transient",
    "error": "explicit permanent",
    "partial": "implicit transient",
    "stale": "implicit permanent",
    "noop": "implicit permanent",
    "drift": "schema drift",
    "latency": "latency",
}


def fault_classes(label: str) -> list[str]:
    """The classes of the faults of a ``faults`` label (a run's plan), in order, without repeats;
    empty for :data:`NO_FAULTS`; a kind this version does not know is its own class.

    >>> fault_classes("none"), fault_classes("noop:refund_order:p=0.5")
    ([], ['implicit permanent'])
    """
    if not isinstance(label, str) or label.strip() in ("", NO_FAULTS):
        return []
    kinds = [item.split(":", 1)[0].strip() for item in label.split(",")]
    return list(dict.fromkeys(FAULT_CLASSES.get(kind, kind) for kind in kinds))
