"""The AsyncActor custom resource: one actor on Kubernetes, as it travels the API.

One source of truth: `asya_operator.api.crds` builds the CRDs (schemas, defaults, descriptions,
CEL rules) from these Structs, and the operator decodes CRs into them. The spec's first fields
(image, handler, env, resources, flavor, and the pod's: volumes, placement, labels, the
sidecar's resources, ...) are `ActorTemplate`'s, which an ActorGroup member's
template is made of too (`asya_operator.api.template`).

Which side decides what, for the fields that `@actor(...)` also has:
- **Scheduling** (`scaling`, `resources`, `flavor`, `pool`, `priority`) is the CR's. The operator
  never imports user code, so it cannot see a decorator's `min_replicas=` or `gpus=`: on
  Kubernetes these are written in the CR (defaults: `@actor`'s defaults). The decorator's values
  are what the local runner uses.
- **Execution** (`retry`, `timeoutSeconds`, `concurrency`, `batch`) is the decorator's unless
  the CR overrides it: the runtime in the pod reads `@actor`, applies the CR's fields over it
  (the operator passes them as `ASYA_ACTOR_OVERRIDES`, see `asya.overrides`) and tells the
  sidecar the result in its Pong. Unset = the decorator's value.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final

import msgspec

from asya.actor import ActorOptions
from asya.envelope import ACTOR_NAME_MAX_LENGTH, ACTOR_NAME_PATTERN
from asya_operator.api.template import (
    GROUP,
    LIST_MAP_BY_TYPE,
    OVERRIDE,
    VERSION,
    ActorBatch,
    ActorRetry,
    ActorScaling,
    ActorTemplate,
    BrokerRef,
    Condition,
    NonNegative,
    ObjectName,
    Positive,
    Validation,
    doc,
    template_validations,
)

_DEFAULTS: Final = ActorOptions()


class AsyncActorSpec(ActorTemplate, frozen=True, kw_only=True, rename="camel"):
    """An actor: its image and handler, how it scales, what it asks for, where its broker is."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        *template_validations("spec"),
        Validation(
            rule="!has(self.timeoutSeconds) || self.timeoutSeconds > 0.0",
            message="spec.timeoutSeconds must be above 0: give the seconds a call may take, or"
            " leave it out to keep the decorator's timeout",
        ),
    )

    replicas: Annotated[
        NonNegative | None,
        doc(
            "Desired replicas, written by KEDA through the scale subresource; unset = minReplicas."
        ),
    ] = None
    scaling: Annotated[ActorScaling, doc("Replica bounds and queue-depth scaling (KEDA).")] = (
        msgspec.field(default_factory=ActorScaling)
    )
    retry: Annotated[
        ActorRetry | None,
        doc("Override of the decorator's retry policy; unset = the decorator's." + OVERRIDE),
    ] = None
    timeout_seconds: Annotated[
        float | None,
        doc("Override of the decorator's timeout_s; unset = the decorator's." + OVERRIDE),
    ] = None
    concurrency: Annotated[
        Positive | None,
        doc(
            "Override of the decorator's concurrency (calls in flight per replica); unset = the"
            " decorator's." + OVERRIDE
        ),
    ] = None
    batch: Annotated[
        ActorBatch | None,
        doc("Override of the decorator's batching; unset = the decorator's." + OVERRIDE),
    ] = None
    pool: Annotated[
        ObjectName | None,
        doc(
            "ResourcePool whose quota admits the replicas, one by one: the Deployment runs the"
            " admitted number (status.admittedReplicas), never more than desired; unset = no"
            " quota, every desired replica runs."
        ),
    ] = _DEFAULTS.pool
    priority: Annotated[
        int,
        doc(
            "Admission priority within the pool (and its cohort); higher goes first and may"
            " preempt lower as the pool's preemption policy allows."
        ),
    ] = _DEFAULTS.priority
    broker: Annotated[BrokerRef, doc("The Secret holding the broker's URLs.")] = msgspec.field(
        default_factory=BrokerRef
    )
    keep_queues: Annotated[
        bool,
        doc("Keep the actor's queues when the AsyncActor is deleted (default: remove them)."),
    ] = False


class AsyncActorStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What the operator observed; written by the operator only."""

    replicas: Annotated[int | None, doc("Replicas the Deployment has (scale subresource).")] = None
    ready_replicas: Annotated[int | None, doc("Replicas whose runtime and sidecar are ready.")] = (
        None
    )
    selector: Annotated[
        str | None, doc("Label selector of the actor's pods, as a string (for the HPA).")
    ] = None
    observed_generation: Annotated[
        int | None,
        doc(
            "The last spec generation whose objects are applied and whose queues are declared"
            " (not advanced while Degraded); Ready is True only when it is the current one."
        ),
    ] = None
    conditions: Annotated[
        Annotated[list[Condition], msgspec.Meta(extra_json_schema=LIST_MAP_BY_TYPE)] | None,
        doc(
            "Ready, Scaling and Degraded; with a pool also QuotaReserved, Admitted and"
            " Preempted, and AcceleratorsUnavailable while admitted replicas wait on a flavor"
            " whose nodes advertise none of an accelerator they ask for."
        ),
    ] = None
    admitted_replicas: Annotated[
        int | None,
        doc(
            "Replicas holding quota in the pool (actors with a pool only): what the Deployment"
            " runs."
        ),
    ] = None
    admitted_flavor: Annotated[
        str | None, doc("The ResourceFlavor the admitted replicas hold quota in.")
    ] = None


class AsyncActor(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """An actor on Kubernetes: a Deployment of runtime and sidecar, scaled by KEDA on its queue.

    Its name is the actor's name (the queue `asya.{namespace}.{name}`)."""

    VALIDATIONS: ClassVar[tuple[Validation, ...]] = (
        Validation(
            rule=f"self.metadata.name.matches('{ACTOR_NAME_PATTERN}')",
            message="metadata.name is the actor's name: lowercase letters, digits and '-',"
            " starting and ending with a letter or digit (e.g. detect-language)",
        ),
        Validation(
            rule=f"size(self.metadata.name) <= {ACTOR_NAME_MAX_LENGTH}",
            message=f"metadata.name is the actor's name: at most {ACTOR_NAME_MAX_LENGTH}"
            " characters, shorten it",
        ),
    )

    api_version: Annotated[str, doc("asya.sh/v1alpha1")] = f"{GROUP}/{VERSION}"
    kind: Annotated[str, doc("AsyncActor")] = "AsyncActor"
    metadata: Annotated[dict[str, Any], doc("Standard object metadata.")] = msgspec.field(
        default_factory=dict
    )
    spec: Annotated[AsyncActorSpec, doc("What the actor is and how it runs.")]
    status: Annotated[AsyncActorStatus | None, doc("What the operator observed.")] = None
