"""What a run is: its spec (the run identity), prompt resolution and argument checks."""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from passk_nb.data.ids import content_id, spec_hash
from passk_nb.data.records import NO_PERTURBATION
from passk_nb.data.store import load, read_specs
from passk_nb.harness.faults import NO_FAULTS
from passk_nb.harness.protocol import PROTOCOLS
from passk_nb.harness.suites.base import Suite
from passk_nb.harness.suites.build import CONFIDENCE_SUFFIX, CONFIDENCE_TEXT


def resolve_prompt(suite: Suite, prompt: str, prompt_name: str | None = None) -> tuple[str, str]:
    """``(name, text)`` for a prompt given by name (see ``suite.prompts``) or as full text. A name
    with :data:`~passk_nb.harness.suites.build.CONFIDENCE_SUFFIX` (``"default+confidence"``) is
    that prompt asking the agent to state its confidence beside its answer.

    >>> from passk_nb.harness.suites import get_suite
    >>> resolve_prompt(get_suite("orders"), "strict")[0]
    'strict'
    >>> name, text = resolve_prompt(get_suite("orders"), "default+confidence")
    >>> name, text.endswith(CONFIDENCE_TEXT)
    ('default+confidence', True)
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"prompt must be a prompt name {sorted(suite.prompts)} or the full prompt text")
    if prompt in suite.prompts:
        return prompt_name or prompt, suite.prompts[prompt]
    base = prompt.removesuffix(CONFIDENCE_SUFFIX)
    if base != prompt and base in suite.prompts:
        return prompt_name or prompt, suite.prompts[base] + "\n\n" + CONFIDENCE_TEXT
    if prompt_name is None and len(prompt.split()) < 3:
        raise ValueError(
            f"unknown prompt name {prompt!r}; choose from {sorted(suite.prompts)} (each also as "
            f"'<name>{CONFIDENCE_SUFFIX}', asking for a stated confidence), "
            "or pass the full system prompt text (with prompt_name= to label it)"
        )
    return prompt_name or "custom", prompt


#: provider_meta keys that say how hard the backend was tried, not what was measured:
#: changing them resumes the same run.
NOT_IDENTITY = frozenset({"timeout_s", "max_attempts"})
#: Spec fields and their defaults; the ``config`` label names only the fields that differ.
CONFIG_DEFAULTS: dict[str, Any] = {
    "temperature": None,
    "seed": 0,
    "json_mode": "off",
    "max_turns": 10,
    "max_format_errors": 2,
    "protocol": "json",
}
#: How a field reads in the ``config`` label.
_CONFIG_NAMES = {"seed": "backend_seed", "json_mode": "json", "fingerprint": "agent"}
#: Settings the label names by :func:`schema_label` instead of their value.
_NOT_IN_LABEL = frozenset({"json_schema"})
JSON_MODES: tuple[str, ...] = ("off", "json", "schema")
#: What a spec field is when an older ``spec.json`` lacks it.
_SPEC_DEFAULTS: dict[str, Any] = {**CONFIG_DEFAULTS, "faults": NO_FAULTS, "perturbation": NO_PERTURBATION}


@dataclass(frozen=True)
class RunSpec:
    """Everything that identifies a run: trials of the same spec resume into each other.

    ``settings`` holds the backend's settings that change what is measured
    (``max_tokens``, ``json_schema``, a CLI version, a Python agent's code
    fingerprint or pinned version, ...): the provider's ``provider_meta`` without
    retry and timeout settings. ``seed`` is the backend seed of trial 0.

    >>> spec = RunSpec("orders", "ollama", "m", None, "abc", 0.7, 0, "schema", 10, 2, {"max_tokens": 256})
    >>> spec.config
    'temperature=0.7, json=schema, max_tokens=256'
    """

    suite: str
    provider: str
    model: str
    base_url_host: str | None
    prompt_hash: str
    temperature: float | None
    seed: int | None
    json_mode: str
    max_turns: int
    max_format_errors: int
    settings: dict[str, Any]
    #: How the agent calls tools (:data:`~passk_nb.harness.protocol.PROTOCOLS`). Left out of the
    #: hash at its default, so the run ids of JSON-protocol runs are those they always had.
    protocol: str = "json"
    #: :func:`~passk_nb.harness.fingerprint.suite_fingerprint` of the suite: an edited task, check,
    #: tool or prompt is a new run.
    suite_fingerprint: str = ""
    #: The tool-fault plan's label (:attr:`~passk_nb.harness.faults.FaultPlan.label`): a faulted run is
    #: another run than a clean one. Left out of the hash without faults, like ``protocol``.
    faults: str = NO_FAULTS
    #: The request perturbation's label (:attr:`~passk_nb.harness.perturb.PerturbPlan.label`),
    #: left out of the hash when prompts are sent as written.
    perturbation: str = NO_PERTURBATION

    @property
    def run_id(self) -> str:
        """The hash of the spec; ``protocol="native"`` gives another id than ``"json"``.

        >>> spec = RunSpec("orders", "ollama", "m", None, "abc", None, 0, "off", 10, 2, {})
        >>> spec.run_id == RunSpec(**{**asdict(spec), "protocol": "native"}).run_id
        False
        """
        return spec_hash(self.identity())

    def identity(self) -> dict[str, Any]:
        """The fields the run id hashes (and ``spec.json`` stores): all of them, ``protocol``,
        ``faults`` and ``perturbation`` only when they are not the default.

        >>> spec = RunSpec("orders", "ollama", "m", None, "abc", None, 0, "off", 10, 2, {})
        >>> faulted = RunSpec(**{**asdict(spec), "faults": "error:*"})
        >>> "faults" in spec.identity(), spec.run_id == faulted.run_id
        (False, False)
        """
        fields = asdict(self)
        if fields["protocol"] == CONFIG_DEFAULTS["protocol"]:
            del fields["protocol"]
        if fields["faults"] == NO_FAULTS:
            del fields["faults"]
        if fields["perturbation"] == NO_PERTURBATION:
            del fields["perturbation"]
        return fields

    @property
    def config(self) -> str:
        """A short label of the configuration: the fields not at their defaults (``"default"``)."""
        fields = asdict(self)
        parts = [
            f"{_CONFIG_NAMES.get(key, key)}={fields[key]}"
            for key, default in CONFIG_DEFAULTS.items()
            if fields[key] != default
        ]
        schema = schema_label(self.suite, self.settings.get("json_schema"))
        parts += [f"schema={schema}"] if schema else []
        parts += [
            f"{_CONFIG_NAMES.get(key, key)}={value}"
            for key, value in sorted(self.settings.items())
            if key not in _NOT_IN_LABEL and value is not None
        ]
        return ", ".join(parts) or "default"


def schema_id(json_schema: bool | dict[str, Any]) -> bool | str:
    """How a schema is recorded: True for the generic action schema, else the hash of the given one.

    >>> schema_id(True), schema_id({"type": "object"})
    (True, 'sha256:ff419ebbeba4')
    """
    if json_schema is True or not isinstance(json_schema, dict):
        return bool(json_schema)
    return "sha256:" + content_id(json_schema)


def schema_label(suite: str, json_schema: Any) -> str | None:
    """How the ``config`` label names the schema a run constrained replies to.

    Nothing for the suite's own action schema (``json=schema`` says it), ``generic`` for the
    generic action schema (``json_schema=True``), else the schema's hash: runs constrained to
    different schemas get different labels, so an analysis never pools them.

    >>> schema_label("orders", True), schema_label("orders", "sha256:ff419ebbeba4")
    ('generic', 'ff419ebbeba4')
    >>> from passk_nb.harness.suites import get_suite
    >>> schema_label("orders", schema_id(get_suite("orders").action_schema())) is None
    True
    """
    if json_schema is True:
        return "generic"
    if not isinstance(json_schema, str):
        return None
    from passk_nb.harness.suites import builtin_suite

    try:  # a record's suite name is data: only a built-in or registered suite is looked up
        own = schema_id(builtin_suite(suite).action_schema())
    except ValueError:  # another suite: name the schema by its hash
        own = None
    return None if json_schema == own else json_schema.removeprefix("sha256:")


def identity_settings(provider_meta: dict[str, Any]) -> dict[str, Any]:
    """The backend settings that are part of a run's identity.

    A pinned ``version`` stands in for the code fingerprint: the user said what the agent is.

    >>> identity_settings({"max_tokens": 64, "timeout_s": 5, "fingerprint": "ab12", "version": "v3"})
    {'max_tokens': 64, 'version': 'v3'}
    """
    settings = {k: v for k, v in provider_meta.items() if k not in NOT_IDENTITY}
    if "version" in settings:
        settings.pop("fingerprint", None)
    return settings


def normalize_temperature(value: Any) -> float | None:
    """``value`` as a float (1, 1.0 are one temperature), None kept; booleans, negatives and NaN refused.

    >>> normalize_temperature(1), normalize_temperature(None)
    (1.0, None)
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(
            f"temperature must be a number ≥ 0 (or None for the backend's default), got {value!r}"
        )
    return float(value)


def normalize_protocol(value: Any) -> str:
    """``"json"`` (the JSON action protocol) or ``"native"`` (the API's tool calling), checked.

    >>> normalize_protocol("native")
    'native'
    """
    if isinstance(value, str) and value in PROTOCOLS:
        return value
    raise ValueError(
        f"protocol must be one of {list(PROTOCOLS)} (json: the JSON action protocol; native: the "
        f"backend's own tool calling), got {value!r}"
    )


def normalize_json_mode(value: Any) -> str:
    """``"off"``, ``"json"`` or ``"schema"`` from a bool or one of those names.

    >>> normalize_json_mode(True), normalize_json_mode(False), normalize_json_mode("schema")
    ('json', 'off', 'schema')
    """
    if value is True:
        return "json"
    if value is False:
        return "off"
    if isinstance(value, str) and value in JSON_MODES:
        return value
    raise ValueError(f"json_mode must be one of {list(JSON_MODES)} (or True/False), got {value!r}")


def _prompt_names(run_dir: Path) -> set[str]:
    """The prompt names a stored run's records carry (none when it holds no readable records: no
    trials that a new run could have resumed)."""
    try:
        return set(load(run_dir, columns=["prompt_name"])["prompt_name"])
    except (OSError, ValueError):
        return set()


def note_changes(out: Path, spec: RunSpec, prompt_name: str) -> None:
    """Say so when the folder holds runs of this backend and model that differ only in the suite,
    the text of the prompt named ``prompt_name`` or the agent's code: what changed is a new run and
    does not resume them. Another prompt name is another prompt on purpose (a grid): no warning."""
    mine = asdict(spec)
    same_except = {key for key in mine if key not in ("prompt_hash", "settings", "suite_fingerprint")}
    specs = read_specs(out)
    alike = [
        other
        for other in specs.values()
        if all(other.get(key, _SPEC_DEFAULTS.get(key)) == mine[key] for key in same_except)
    ]
    mine_suite = spec.suite_fingerprint
    suites = sorted({str(o.get("suite_fingerprint")) for o in alike} - {mine_suite})
    if suites and spec.run_id not in specs:
        warnings.warn(
            f"suite {spec.suite!r} changed since the runs in {out} (suite fingerprint now "
            f"{spec.suite_fingerprint}, was {', '.join(suites)}: a task, check, tool, script or prompt "
            "differs), so this is a new run and resumes none of their trials",
            UserWarning,
            stacklevel=5,
        )
    others = [o for o in alike if o.get("suite_fingerprint") == spec.suite_fingerprint]
    other_texts = [
        run_id
        for run_id, o in specs.items()
        if o in others and o.get("prompt_hash") != spec.prompt_hash and o.get("settings") == spec.settings
    ]
    prompts = sorted(
        {specs[run_id]["prompt_hash"] for run_id in other_texts if prompt_name in _prompt_names(out / run_id)}
    )
    if prompts:
        warnings.warn(
            f"{out} holds runs of this provider/model/settings with prompt {prompt_name!r} of another text "
            f"(prompt hashes {', '.join(prompts)}); the prompt changed (now {spec.prompt_hash}), so this is "
            "a new run and does not resume them",
            UserWarning,
            stacklevel=5,
        )
    mine_code = spec.settings.get("version", spec.settings.get("fingerprint"))
    codes = sorted(
        {
            str(o["settings"].get("version", o["settings"].get("fingerprint")))
            for o in others
            if o.get("prompt_hash") == spec.prompt_hash
            and isinstance(o.get("settings"), dict)
            and o["settings"].get("version", o["settings"].get("fingerprint")) not in (None, mine_code)
        }
    )
    if mine_code is not None and codes:
        warnings.warn(
            f"{out} holds runs of an agent named {spec.model!r} with other code (fingerprints/versions "
            f"{', '.join(codes)}); this agent's is {mine_code}: a new run that does not resume them",
            UserWarning,
            stacklevel=5,
        )
