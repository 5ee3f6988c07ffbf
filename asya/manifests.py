"""Helm values for the `asya-pipeline` chart from decorated actors: what `asya render` writes.

The `@actor` decorator is the source of truth for an app's actors; these values are how it
reaches a cluster. Each actor becomes an entry under `actors`, keyed by its name, holding the
AsyncActor `spec` fields (camelCase, as the CRD names them) that its decorator sets to a value
other than asya's default. A field left out takes the CRD's default, which is the same number
(a test holds the CRD, `ActorOptions` and the charts to that), so the chart, the cluster and
`asya dev` agree without repeating every default in every values file.

What a decorator cannot say (the image, a flavor, env, the broker Secret) comes from
`render_values`' arguments or an overlay merged over the result (`merge_overlay`).

What render writes, the cluster takes: the few decorator values that `@actor` accepts but the
AsyncActor CRD refuses (a pool that is no Kubernetes object name, a retry whose base delay is
above its longest) are refused here, in the decorator's words. Then, once an overlay is merged,
`cluster_problems` makes of the values each AsyncActor's `spec` as the chart's template does
and checks it as the API server would: fields the CRD does not know, types and bounds, then the
CRD's CEL rules, all read from the CRD's own schema, which the operator generates into this
package (`asya/schemas/asyncactor.json`; asya never imports the operator), with the
operator's own implementation of those steps (`asya.crd_rules`). A test holds this check and
the operator's check of a submitted CR (`asya-operator plan`) to one verdict on every CEL rule's
good and bad examples.

Pure: no I/O; `asya.cli.render` reads the app and the schema and writes the file.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from asya.actor import ActorOptions, ActorSpec
from asya.errors import AsyaError

_DEFAULTS: Final = ActorOptions()
_API_VERSION: Final = "asya.sh/v1alpha1"
_SCALING: Final = _DEFAULTS.scaling
_RESOURCES: Final = _DEFAULTS.resources
_RETRY: Final = _DEFAULTS.retry

# Decorator field -> AsyncActor field, for the fields that map one to one.
_SCALING_FIELDS: Final = (
    ("min_replicas", "minReplicas"),
    ("max_replicas", "maxReplicas"),
    ("queue_length", "queueLength"),
    ("activation", "activationQueueLength"),
)
_RETRY_FIELDS: Final = (
    ("max_attempts", "maxAttempts"),
    ("base_delay_ms", "baseDelayMs"),
    ("factor", "factor"),
    ("max_delay_ms", "maxDelayMs"),
    ("jitter", "jitter"),
    ("retry_timeouts", "retryTimeouts"),
)


# A ResourcePool's name, as Kubernetes names objects (a DNS-1123 subdomain).
_OBJECT_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_OBJECT_NAME_MAX_LENGTH: Final = 253


class RenderError(AsyaError):
    """The actors cannot be written as chart values (a bad overlay, an empty image, a decorator
    value the cluster would refuse)."""


@dataclasses.dataclass(frozen=True)
class Rounded:
    """A decorator value the CRD cannot hold exactly, and what was written instead."""

    actor: str
    field: str
    given: float
    written: int


def render_values(
    specs: Iterable[ActorSpec], *, image: str, namespace: str | None = None
) -> tuple[dict[str, Any], list[Rounded]]:
    """Values for `asya-pipeline` with one entry per actor, and the values that were rounded.

    KEDA counts whole seconds: a fractional `cooldown_s` or `polling_interval_s` is rounded up
    (polling to at least 1 s) and reported, so the caller can say so.

    Raises:
        RenderError: `image` is empty, or an actor's decorator says what the cluster refuses.
    """
    if not image.strip():
        raise RenderError("--image is empty: give the image holding the actors' code")
    rounded: list[Rounded] = []
    actors = {}
    for spec in sorted(specs, key=_name):
        _check_for_the_cluster(spec)
        actors[spec.name], rounded_here = actor_entry(spec)
        rounded += rounded_here
    values: dict[str, Any] = {"image": image}
    if namespace:
        values["namespace"] = namespace
    values["actors"] = actors
    return values, rounded


def _name(spec: ActorSpec) -> str:
    return spec.name


def _check_for_the_cluster(spec: ActorSpec) -> None:
    """Raises: RenderError: a decorator value `@actor` takes and the AsyncActor CRD refuses."""
    where = f"actor {spec.name}"
    if spec.pool is not None and (
        len(spec.pool) > _OBJECT_NAME_MAX_LENGTH or not _OBJECT_NAME.fullmatch(spec.pool)
    ):
        raise RenderError(
            f"{where}: pool {spec.pool!r} is not a ResourcePool's name, which Kubernetes"
            " gives objects: lowercase letters, digits, '-' and '.', at most"
            f" {_OBJECT_NAME_MAX_LENGTH}, starting and ending with a letter or digit; fix"
            " @actor(pool=...)"
        )
    retry = spec.retry
    if retry.base_delay_ms > retry.max_delay_ms:
        raise RenderError(
            f"{where}: retry.baseDelayMs ({retry.base_delay_ms}) is above retry.maxDelayMs"
            f" ({retry.max_delay_ms}), which the AsyncActor CRD refuses: raise max_delay_ms or"
            " lower base_delay_ms in @actor(retry=RetryPolicy(...))"
        )


def actor_entry(spec: ActorSpec) -> tuple[dict[str, Any], list[Rounded]]:
    """The actor's entry under `actors` (unchecked: `render_values` checks it first), and the
    values rounded on the way."""
    rounded: list[Rounded] = []
    entry: dict[str, Any] = {"handler": spec.ref}
    scaling = _changed(spec.scaling, _SCALING, _SCALING_FIELDS)
    for field, key, minimum in (
        ("polling_interval_s", "pollingInterval", 1),
        ("cooldown_s", "cooldownPeriod", 0),
    ):
        given = getattr(spec.scaling, field)
        if given != getattr(_SCALING, field):
            written = max(minimum, math.ceil(given))
            scaling[key] = written
            if written != given:
                rounded.append(Rounded(spec.name, f"scaling.{key}", given, written))
    if scaling:
        entry["scaling"] = scaling
    resources = {
        key: getattr(spec.resources, key)
        for key in ("cpu", "memory", "gpus")
        if getattr(spec.resources, key) != getattr(_RESOURCES, key)
    }
    if resources:
        entry["resources"] = resources
    if spec.concurrency != _DEFAULTS.concurrency:
        entry["concurrency"] = spec.concurrency
    if spec.timeout_s != _DEFAULTS.timeout_s:
        entry["timeoutSeconds"] = float(spec.timeout_s)
    retry = _changed(spec.retry, _RETRY, _RETRY_FIELDS)
    if retry:
        # The CR's retry replaces the decorator's policy whole: write every field, so an
        # override never silently resets the fields the decorator did set.
        entry["retry"] = {key: getattr(spec.retry, field) for field, key in _RETRY_FIELDS}
    if spec.batch is not None:
        entry["batch"] = {"size": spec.batch, "waitMs": spec.batch_wait_ms}
    if spec.pool is not None:
        entry["pool"] = spec.pool
    if spec.priority != _DEFAULTS.priority:
        entry["priority"] = spec.priority
    return entry, rounded


def _changed(value: object, default: object, fields: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    return {
        key: getattr(value, field)
        for field, key in fields
        if getattr(value, field) != getattr(default, field)
    }


def merge_overlay(values: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with `overlay` merged over it as Helm merges values files: mappings merge key
    by key, anything else (lists included) is replaced, and `None` removes the key."""
    merged = dict(values)
    for key, value in overlay.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_overlay(merged[key], value)
        else:
            merged[key] = value
    return merged


def actor_specs(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each AsyncActor's `spec` as the asya-pipeline chart makes it from `values`
    (`templates/asyncactors.yaml`): `actorDefaults` under the actor's own fields, then the
    chart-wide image and broker Secret where the actor names none. A test renders the chart
    with Helm and holds the two equal, given the values as Helm has them (the chart's
    `values.yaml` under the user's). `asya render` passes only its own: the chart's defaults
    (an empty `actorDefaults`, a broker Secret's name) change no verdict."""
    defaults = values.get("actorDefaults") or {}
    broker = values.get("broker") or {}
    specs = {}
    for name, actor in (values.get("actors") or {}).items():
        spec = _merge_overwrite(copy.deepcopy(defaults), copy.deepcopy(actor or {}))
        if not spec.get("image") and values.get("image"):
            spec["image"] = values["image"]
        spec_broker = spec.get("broker") or {}
        if not spec_broker.get("secretName") and broker.get("secretName"):
            spec_broker["secretName"] = broker["secretName"]
        if spec_broker:
            spec["broker"] = spec_broker
        specs[str(name)] = spec
    return specs


def _merge_overwrite(into: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Sprig's `mustMergeOverwrite`: mappings merge key by key, `over` wins elsewhere."""
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge_overwrite(into[key], value)
        else:
            into[key] = value
    return into


def shape_problems(values: Mapping[str, Any]) -> list[str]:
    """Where `values` is not shaped as the chart reads it (empty: it is), so that
    `actor_specs` can read it: `actors` a mapping of names (strings) to mappings, and
    `actorDefaults`, `broker` and each actor's `broker` mappings (or null)."""
    problems = []
    for key in ("actors", "actorDefaults", "broker"):
        if not isinstance(values.get(key), Mapping | None):
            problems.append(f"{key}: must be a mapping, got {_kind(values[key])}")
    actors = values.get("actors")
    if isinstance(actors, Mapping):
        for name, actor in actors.items():
            if not isinstance(name, str):
                problems.append(f"actors: the key {name!r} is no actor name: quote it")
            elif not isinstance(actor, Mapping | None):
                problems.append(f"actors.{name}: must be a mapping of fields, got {_kind(actor)}")
            elif not isinstance((actor or {}).get("broker"), Mapping | None):
                problems.append(f"actors.{name}.broker: must be a mapping")
    return problems


def _kind(value: object) -> str:
    return {list: "a list", str: "a string", bool: "a boolean"}.get(type(value), repr(value))


def cluster_problems(values: Mapping[str, Any], crd_schema: dict[str, Any]) -> list[str]:
    """Why the API server would refuse the AsyncActors the chart makes of `values` (empty: it
    would take them all), each as `actors.NAME.FIELD: what`, in the steps the server takes:
    unknown fields (kubectl's strict field validation), the schema's types and bounds, then
    the CEL rules on the defaulted object (only on one the schema takes, as a rule may rely on a
    field's type). `crd_schema` is the AsyncActor CRD's openAPIV3Schema.

    Raises:
        ImportError: cel-python or jsonschema is not installed (`asya[render]`).
    """
    import jsonschema  # optional (`asya[render]`), as the rules' evaluator is

    from asya import crd_rules

    shape = shape_problems(values)
    if shape:
        return shape
    spec_schema = crd_schema["properties"]["spec"]
    # An integer is a JSON number without a fraction (2.0 is a float: msgspec and the operator
    # refuse it, where jsonschema's Draft 7 takes it for an integer) and fits in 64 bits.
    integers = jsonschema.Draft7Validator.TYPE_CHECKER.redefine(
        "integer",
        lambda _checker, value: (
            isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
        ),
    )
    validating = jsonschema.validators.extend(jsonschema.Draft7Validator, type_checker=integers)  # type: ignore[no-untyped-call]
    validator = validating(spec_schema)
    problems: list[str] = []
    for name, spec in actor_specs(values).items():
        where = f"actors.{name}"  # the chart's AsyncActor `name`, whose spec is the entry
        missing = [
            f"{where}.{field}: missing; {fix}"
            for field, fix in (
                ("handler", "set it to module:attr"),
                ("image", "set it, or the top-level image"),
            )
            if spec.get(field) is None
        ]
        problems += missing
        unknown = crd_rules.unknown_fields(spec, spec_schema, where)
        problems += [f"{field}: the AsyncActor CRD has no such field" for field in unknown]
        if unknown:
            continue
        spec = crd_rules.without_nulls(spec, spec_schema)
        problems += crd_rules.duplicate_keys(spec, spec_schema, where)
        errors = [
            f"{'.'.join([where, *(str(p) for p in error.absolute_path)])}: {error.message}"
            for error in validator.iter_errors(spec)
            # A missing handler or image is said above, with the fix.
            if not (error.validator == "required" and not error.absolute_path)
        ]
        problems += errors
        if not errors and not missing:
            actor = {"apiVersion": _API_VERSION, "kind": "AsyncActor", "metadata": {"name": name}}
            defaulted = crd_rules.apply_defaults({**actor, "spec": spec}, crd_schema)
            problems += [
                problem.replace(f"{where}.spec", where, 1)
                for problem in crd_rules.cel_violations(defaulted, crd_schema, where)
            ]
    return problems
