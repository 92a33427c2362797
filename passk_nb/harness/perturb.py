"""Request perturbations: the same task asked in other words, reproducibly from the trial.

A plan rewrites each trial's task prompt before the agent sees it, keeping its meaning, by a
seeded draw of the task and trial: built-in rules (``reorder``, ``synonyms``, ``formal``,
``informal``, ``typo``, ``distractor``; ``"all"``), your own ``(text, rng) -> text`` rules by name,
or variant lists per task. Its label is part of the run's identity (the ``perturbation`` column)
and each record says what its trial got (``perturbation_applied``).

Each rule: ``docs/guide/faults.md``.

>>> plan = parse_perturb("typo")
>>> text, applied = plan.apply("t", "Please cancel my order that has not shipped.", "t:0")
>>> applied, text != "Please cancel my order that has not shipped."
('typo', True)
>>> plan.apply("t", "Please cancel my order that has not shipped.", "t:0")[0] == text  # reproducible
True
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from passk_nb.data.ids import content_id
from passk_nb.data.records import NO_PERTURBATION
from passk_nb.harness.fingerprint import fingerprint

__all__ = ["RULES", "PerturbPlan", "PerturbationError", "parse_perturb", "NO_PERTURBATION"]

Rule = Callable[[str, random.Random], str]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")

#: Word -> synonyms that keep the meaning in a support request.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "please": ("kindly",),
    "refund": ("reimburse",),
    "cancel": ("call off",),
    "order": ("purchase",),
    "sent back": ("returned",),
    "arrived": ("came",),
    "cracked": ("broken",),
    "reported": ("flagged",),
    "moved": ("relocated",),
    "right now": ("immediately", "at once"),
    "changed my mind": ("reconsidered",),
    "hasn't shipped yet": ("is not yet shipped",),
    "don't need it any more": ("no longer need it",),
    "i'd like": ("i would like", "i want"),
    "money back": ("refund",),
}
_CONTRACTIONS = {
    "I'm": "I am",
    "I've": "I have",
    "I'd": "I would",
    "don't": "do not",
    "hasn't": "has not",
    "isn't": "is not",
    "can't": "cannot",
    "it's": "it is",
}
_GREETING = re.compile(r"^(hi|hello|hey)\b[,!]?\s*", re.IGNORECASE)
#: Sentences that change nothing a task asks for.
DISTRACTORS: tuple[str, ...] = (
    "By the way, the weather here has been lovely this week.",
    "I am writing this from my phone, so sorry for any typos.",
    "A friend recommended your store to me last year.",
    "I have been a customer for a while and usually shop on weekends.",
)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text.strip()) if s]


def reorder(text: str, rng: random.Random) -> str:
    """The sentences in another order (unchanged when there is only one)."""
    parts = _sentences(text)
    if len(parts) < 2:
        return text
    order = list(range(len(parts)))
    while order == sorted(order):
        rng.shuffle(order)
    return " ".join(parts[i] for i in order)


def _match_case(word: str, like: str) -> str:
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


_PHRASES = re.compile(
    "|".join(rf"\b{re.escape(p)}\b" for p in sorted(SYNONYMS, key=len, reverse=True)), re.IGNORECASE
)


def synonyms(text: str, rng: random.Random) -> str:
    """Each phrase of :data:`SYNONYMS` replaced by one of its synonyms (drawn once per phrase), in
    one pass: a synonym is never replaced again."""
    choice = {phrase: rng.choice(options) for phrase, options in SYNONYMS.items()}

    def replace(match: re.Match[str]) -> str:
        return _match_case(choice[match.group().lower()], match.group())

    return _PHRASES.sub(replace, text)


def formal(text: str, rng: random.Random) -> str:
    """Contractions spelled out, a formal greeting, and thanks at the end."""
    for short, long in _CONTRACTIONS.items():
        text = re.sub(rf"\b{re.escape(short)}\b", long, text)
    text = _GREETING.sub("", text.strip())
    text = text[:1].upper() + text[1:]
    return f"Good day. {text} Thank you for your assistance."


def informal(text: str, rng: random.Random) -> str:
    """Contractions, an informal greeting, and lower-case sentence openings."""
    for short, long in _CONTRACTIONS.items():
        text = re.sub(rf"\b{re.escape(long)}\b", short, text)
    text = _GREETING.sub("", text.strip())
    parts = [_lower_first(s) for s in _sentences(text)]
    return "hey, " + " ".join(parts) + " thx"


#: Sentence openings :func:`informal` writes in lower case (never a name, never "I").
_COMMON_OPENINGS = frozenset({"please", "the", "this", "cancel", "my", "can", "could", "refund", "ship"})


def _lower_first(sentence: str) -> str:
    first = sentence.split(" ", 1)[0].strip(",.;:!?")
    return sentence[:1].lower() + sentence[1:] if first.lower() in _COMMON_OPENINGS else sentence


def typo(text: str, rng: random.Random) -> str:
    """Two adjacent interior letters of one lower-case word of five letters or more swapped."""
    words = [m for m in re.finditer(r"\b[a-z]{5,}\b", text)]
    candidates = [m for m in words if len(set(m.group()[1:-1])) > 1]
    if not candidates:
        return text
    word = rng.choice(candidates)
    letters = list(word.group())
    spots = [i for i in range(1, len(letters) - 2) if letters[i] != letters[i + 1]]
    i = rng.choice(spots) if spots else 1
    letters[i], letters[i + 1] = letters[i + 1], letters[i]
    return text[: word.start()] + "".join(letters) + text[word.end() :]


def distractor(text: str, rng: random.Random) -> str:
    """One sentence of :data:`DISTRACTORS` inserted after a sentence of the request."""
    parts = _sentences(text)
    at = rng.randrange(1, len(parts) + 1)
    return " ".join([*parts[:at], rng.choice(DISTRACTORS), *parts[at:]])


#: The built-in rules, by name.
RULES: dict[str, Rule] = {
    "reorder": reorder,
    "synonyms": synonyms,
    "formal": formal,
    "informal": informal,
    "typo": typo,
    "distractor": distractor,
}


class PerturbationError(ValueError):
    """A perturbation rule failed on a trial's draw (it raised, or returned no prompt text)."""


@dataclass(frozen=True)
class PerturbPlan:
    """What a run does to its task prompts: rules (one drawn per trial) or variant lists per task."""

    rules: Mapping[str, Rule] = field(default_factory=dict)
    variants: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The plan as its run-identity label: the rule names (a custom rule with its code's
        fingerprint), ``variants:<hash>`` for variant lists, :data:`NO_PERTURBATION` for none."""
        if self.variants:
            return "variants:" + content_id({t: list(v) for t, v in sorted(self.variants.items())})
        names = [
            name if RULES.get(name) is rule else f"{name}@{fingerprint(rule)}"
            for name, rule in self.rules.items()
        ]
        return ",".join(names) or NO_PERTURBATION

    def __bool__(self) -> bool:
        return bool(self.rules or self.variants)

    def check(self, tasks: Sequence[Any]) -> None:
        """Before any trial: variant lists name tasks of the suite, and every rule turns every
        task's prompt into a prompt text (a rule of your own that fails says so here, once)."""
        ids = [task.id for task in tasks]
        unknown = sorted(set(self.variants) - set(ids))
        if unknown:
            raise ValueError(f"perturb= has variant lists for unknown tasks {unknown}; tasks are {ids}")
        for name, rule in self.rules.items():
            for task in tasks:
                try:
                    text = rule(task.prompt, random.Random(0))
                except Exception as exc:
                    raise ValueError(
                        f"perturbation rule {name!r} failed on task {task.id!r}'s prompt: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                if not isinstance(text, str) or not text.strip():
                    raise ValueError(f"perturbation rule {name!r} returned {text!r:.60}, not a prompt text")

    def apply(self, task_id: str, prompt: str, key: str) -> tuple[str, str | None]:
        """``(the prompt the trial sends, what was applied)``: a rule's name, ``variant <i>`` (from 0),
        or None when the task keeps its prompt. The draw depends on the label and ``key`` alone."""
        rng = random.Random(f"{self.label}|{key}")
        if self.variants:
            texts = self.variants.get(task_id)
            if not texts:
                return prompt, None
            i = rng.randrange(len(texts))
            return texts[i], f"variant {i}"
        name = rng.choice(sorted(self.rules)) if len(self.rules) > 1 else next(iter(self.rules))
        where = f"on trial {key!r}"  # task:trial
        try:
            text = self.rules[name](prompt, rng)
        except Exception as exc:
            raise PerturbationError(
                f"perturbation rule {name!r} failed {where}: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(text, str) or not text.strip():
            raise PerturbationError(
                f"perturbation rule {name!r} returned {text!r:.60} {where}, not a prompt text"
            )
        return text, name

    def check_draws(self, prompts: Mapping[str, str], jobs: Sequence[tuple[str, int]]) -> None:
        """Before trials run: each of their draws made once (``jobs``: (task id, trial)), so a rule
        that fails on some draws is refused naming the rule, the task and the trial, before any of
        them runs. A rule draws from the trial's seeded ``rng`` alone, so the trial's draw is the same;
        one that fails in a trial anyway (it reads something else) is that trial's ``infra_error``."""
        if self.rules:
            for task_id, trial in jobs:
                self.apply(task_id, prompts[task_id], f"{task_id}:{trial}")


def parse_perturb(
    spec: str | Mapping[str, Any] | PerturbPlan | None, suite_rules: Mapping[str, Rule] | None = None
) -> PerturbPlan:
    """A :class:`PerturbPlan` from a spec (see the module), custom rules or variant lists.
    ``suite_rules``: the suite's own rules (:attr:`~passk_nb.harness.suites.base.Suite.perturbations`),
    named in a spec like the built-in ones; one named like a built-in rule replaces it (its label
    then carries its code's fingerprint, so it is never pooled with the built-in rule's runs).

    >>> parse_perturb("typo,reorder").label, parse_perturb(None).label
    ('typo,reorder', 'none')
    >>> parse_perturb("tpyo")
    Traceback (most recent call last):
    ...
    ValueError: unknown perturbation rule 'tpyo'; choose from reorder, synonyms, formal, informal, typo, \
distractor, or all
    """
    if spec is None or isinstance(spec, PerturbPlan):
        return spec or PerturbPlan()
    if isinstance(spec, str):
        text = spec.strip()
        if text in ("", NO_PERTURBATION):
            return PerturbPlan()
        available = {**RULES, **(suite_rules or {})}
        names = list(available) if text == "all" else [name.strip() for name in text.split(",")]
        for name in names:
            if name not in available:
                raise ValueError(
                    f"unknown perturbation rule {name!r}; choose from {', '.join(available)}, or all"
                )
        if len(set(names)) != len(names):
            raise ValueError(f"perturb={spec!r} names a rule twice")
        return PerturbPlan(rules={name: available[name] for name in names})
    if isinstance(spec, Mapping) and spec:
        if all(callable(v) for v in spec.values()):
            return PerturbPlan(rules={str(k): v for k, v in spec.items()})
        variants = {}
        for task_id, texts in spec.items():
            if isinstance(texts, str) or not isinstance(texts, Sequence) or not texts:
                raise ValueError(f"perturb[{task_id!r}] must be a non-empty list of prompt texts")
            if not all(isinstance(t, str) and t.strip() for t in texts):
                raise ValueError(f"perturb[{task_id!r}] holds something else than prompt texts")
            variants[str(task_id)] = tuple(texts)
        return PerturbPlan(variants=variants)
    raise TypeError(
        "perturb must be a rule name or comma-separated names (e.g. 'typo,synonyms', 'all'), a dict of "
        "your own rules (name -> function(text, rng)) or of variant lists (task id -> texts); "
        f"got {spec!r:.80}"
    )
