"""The question a run answers, stated up front: a precision, a paired comparison or a gate.

A :class:`Question` (parsed from a string such as ``"gate=0.8 k=2"`` by :meth:`Question.parse`)
says what the run's trials must settle, with k, the level that holds at every look and an
optional ``final=N``: a cap of N trials per task with a last, fixed-n look there
(:meth:`Question.levels` splits α between that look and the anytime-valid ones before it). Why
the split is valid: ``docs/methods/sequential.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from passk_nb.stats.checks import check_k
from passk_nb.stats.params import CI

#: The kinds of question :class:`Question` states.
KINDS: tuple[str, ...] = ("precision", "compare", "gate")
#: Keys a question string may carry.
_KEYS: tuple[str, ...] = ("precision", "compare", "gate", "k", "ci", "final")
#: With ``final=N``, the share of α the final fixed-n look spends (the looks before it spend the
#: rest, anytime-valid): most of it, so that the final look is nearly the fixed design's own.
_FINAL_SHARE = 0.8


@dataclass(frozen=True)
class Question:
    """The question a run answers, stated up front; parse one with :meth:`Question.parse`.

    - ``kind="precision"``: pass^k of each configuration to ± ``precision`` (these tasks);
    - ``kind="compare"``: is pass^k of arm ``b`` (a value of column ``on``) different from arm
      ``a``'s, paired by task; decided when the interval of b − a excludes 0, or, with
      ``precision``, when it is known to ± ``precision``;
    - ``kind="gate"``: is pass^k at least ``gate``: decided when the interval is above it (passes)
      or below it (fails).

    ``k`` is k of pass^k, ``ci`` the level that holds at every look. ``final=N`` caps every cell at
    N trials, the fixed design's n: the run then never spends more than the fixed design, and
    once every cell has N trials it takes a last look with the fixed-n interval (:func:`status`;
    α is split, :data:`_FINAL_SHARE` to that look, the rest to the anytime-valid looks before it).

    >>> Question.parse("gate=0.8 k=2")
    Question(kind='gate', k=2, ci=0.95, precision=None, gate=0.8, on=None, a=None, b=None, final=None)
    >>> q = Question.parse("compare=prompt_name:default,strict; precision=0.1")
    >>> q.kind, q.on, q.a, q.b, q.precision
    ('compare', 'prompt_name', 'default', 'strict', 0.1)
    """

    kind: str
    k: int = 1
    ci: float = CI
    precision: float | None = None
    gate: float | None = None
    on: str | None = None
    a: str | None = None
    b: str | None = None
    final: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a question's kind is one of {list(KINDS)}; got kind={self.kind!r}")
        check_k(self.k)
        if not 0 < self.ci < 1:
            raise ValueError(f"ci must be between 0 and 1 (e.g. 0.95); got ci={self.ci}")
        if self.precision is not None and not 0 < self.precision <= 0.5:
            raise ValueError(
                f"precision is the half-width to reach, between 0 and 0.5 (e.g. 0.05); got {self.precision}"
            )
        if self.kind == "precision" and self.precision is None:
            raise ValueError("a precision question needs the half-width: precision=0.05")
        if self.kind == "gate" and (self.gate is None or not 0 < self.gate < 1):
            raise ValueError(f"a gate needs a threshold strictly between 0 and 1 (gate=0.8); got {self.gate}")
        if self.kind == "compare":
            if not (self.on and self.a and self.b):
                raise ValueError("a comparison names a column and two of its values: compare=prompt_name:a,b")
            if self.a == self.b:
                raise ValueError(f"a comparison needs two different arms; both are {self.a!r}")
        if self.final is not None and (
            isinstance(self.final, bool) or not isinstance(self.final, int) or self.final < self.k
        ):
            raise ValueError(
                f"final is the trials per task of the last, fixed-n look, at least k={self.k} "
                f"(e.g. final=16, the n plan() recommends); got final={self.final!r}"
            )

    @classmethod
    def parse(cls, text: str) -> Question:
        """A question from its string: ``key=value`` items separated by spaces or ``;``.

        Keys: ``precision=H`` (half-width), ``compare=COLUMN:A,B`` (B against A, paired by task;
        with ``precision=`` also decided when the difference is known to ± H), ``gate=M`` (is
        pass^k above M), ``k=K`` (default 1), ``ci=LEVEL`` (default 0.95), ``final=N`` (at most N
        trials per task, with a last fixed-n look there).

        >>> q = Question.parse("precision=0.05 k=4 ci=0.9")
        >>> q.kind, q.k, q.ci, q.precision, q.final
        ('precision', 4, 0.9, 0.05, None)
        >>> Question.parse("gate=0.8 k=2 final=16").final
        16
        >>> Question.parse("gate=high")
        Traceback (most recent call last):
        ...
        ValueError: gate=high: gate is a number (e.g. gate=0.8)
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(
                "a question is a string such as 'precision=0.05', 'compare=prompt_name:a,b' or 'gate=0.8'"
            )
        items: dict[str, str] = {}
        for item in re.split(r"[\s;]+", text.strip()):
            key, sep, value = item.partition("=")
            if not sep or not value:
                raise ValueError(f"{item!r} in question {text!r} is not key=value (e.g. precision=0.05)")
            if key not in _KEYS:
                raise ValueError(f"unknown key {key!r} in question {text!r}; the keys are {list(_KEYS)}")
            if key in items:
                raise ValueError(f"question {text!r} gives {key}= twice")
            items[key] = value
        kinds = [kind for kind in ("compare", "gate") if kind in items]
        if len(kinds) > 1:
            raise ValueError(f"question {text!r} asks two things (compare= and gate=); ask one per run")
        if not kinds and "precision" not in items:
            raise ValueError(f"question {text!r} asks nothing: give precision=, compare= or gate=")
        fields: dict[str, object] = {"kind": kinds[0] if kinds else "precision"}
        for key in ("precision", "gate", "ci"):
            if key in items:
                fields[key] = _number(key, items[key], float)
        for key in ("k", "final"):
            if key in items:
                fields[key] = _number(key, items[key], int)
        if "compare" in items:
            column, sep, arms = items["compare"].partition(":")
            values = arms.split(",")
            if not sep or not column or len(values) != 2 or not all(values):
                raise ValueError(
                    f"compare={items['compare']}: name a column and two of its values, "
                    "compare=COLUMN:A,B (e.g. compare=prompt_name:default,strict)"
                )
            fields.update(on=column, a=values[0], b=values[1])
        return cls(**fields)  # type: ignore[arg-type]

    def __str__(self) -> str:
        if self.kind == "precision":
            text = f"pass^{self.k} to ± {self.precision:g}"
        elif self.kind == "gate":
            text = f"pass^{self.k} ≥ {self.gate:g}"
        else:
            text = f"pass^{self.k} of {self.on}={self.b} against {self.a}"
        if self.kind == "compare" and self.precision is not None:
            text += f" (or known to ± {self.precision:g})"
        if self.final is None:
            return f"{text}, {self.ci:.0%} at every look"
        return f"{text}, {self.ci:.0%}: at most {self.final} trials per task, a fixed-n look there"

    def levels(self) -> tuple[float, float | None]:
        """The levels of the anytime-valid looks and of the final fixed-n look (None without
        ``final``): α split, :data:`_FINAL_SHARE` to the final look; by the union bound both hold
        together at ``ci``.

        >>> [round(x, 3) for x in Question.parse("gate=0.8 final=8").levels()]
        [0.99, 0.96]
        """
        if self.final is None:
            return self.ci, None
        alpha = 1 - self.ci
        return 1 - alpha * (1 - _FINAL_SHARE), 1 - alpha * _FINAL_SHARE


def _number(key: str, value: str, kind: type) -> float | int:
    try:
        return kind(value)
    except ValueError:
        raise ValueError(
            f"{key}={value}: {key} is {'a whole number' if kind is int else 'a number'} "
            f"(e.g. {key}={ {'k': 2, 'ci': 0.95, 'gate': 0.8, 'final': 16}.get(key, 0.05) })"
        ) from None


def as_question(question: Question | str) -> Question:
    """``question`` as a :class:`Question` (a string is parsed)."""
    return question if isinstance(question, Question) else Question.parse(question)
