"""The controller's reads and writes of the cluster, through the official `kubernetes` client.

I/O only, no decisions: read what an AsyncActor needs (its broker Secret, its flavor, the
namespace's other actors), apply the objects the `plan_*` functions made, write a status. The
client is synchronous: the controller calls these through `asyncio.to_thread`, each with a
client of its own (`api_client()`), so the event loop never blocks on the API server.

Objects are applied with server-side apply (field manager `asya-operator`, forced): on a real
cluster a field the plan no longer sets is removed, and list items (containers, env) are
replaced, not merged. An API server that cannot apply to a missing object (the tests' stand-in)
answers 404, and the object is then created.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterable
from typing import Any, Final

import kubernetes
import msgspec
from kubernetes.client import ApiException, CoreV1Api, CustomObjectsApi

from asya_operator.deployment import placement_flavor
from asya_operator.pools import Cohort, ResourcePool
from asya_operator.resources import GROUP, VERSION, AsyncActor, ResourceFlavor

FIELD_MANAGER: Final = "asya-operator"
"""Who the operator's server-side applies are recorded as."""

ACTORS_PLURAL: Final = "asyncactors"
FLAVORS_PLURAL: Final = "resourceflavors"
POOLS_PLURAL: Final = "resourcepools"
COHORTS_PLURAL: Final = "cohorts"

_APPLY: Final = "application/apply-patch+yaml"  # a JSON body is YAML too
_MERGE: Final = "application/merge-patch+json"
_PLURALS: Final = {
    "Deployment": "deployments",
    "ScaledObject": "scaledobjects",
    "TriggerAuthentication": "triggerauthentications",
}


@dataclasses.dataclass(frozen=True)
class World:
    """What the cluster holds for one AsyncActor."""

    secret: dict[str, str] | None
    """The broker Secret's data, decoded (None: no such Secret)."""
    flavor: ResourceFlavor | None
    """The ResourceFlavor the actor names (None: it names none, or it is not found)."""
    actors: list[AsyncActor]
    """The namespace's AsyncActors that are not being deleted."""
    deployment_status: dict[str, Any] | None
    """The actor's Deployment's `status` (None: no Deployment yet)."""


@dataclasses.dataclass(frozen=True)
class AdmissionWorld:
    """What admission decides over: every pool and cohort, and every actor with a pool."""

    pools: list[ResourcePool]
    cohorts: list[Cohort]
    actors: list[tuple[str, AsyncActor]]
    """(namespace, actor) for each AsyncActor with a pool that is not being deleted."""
    namespace_labels: dict[str, dict[str, str]]
    """The labels of those actors' namespaces ({} for one that cannot be read)."""


def load_client_config() -> None:
    """Point the official client at the cluster: in a pod its service account, else the
    kubeconfig (`KUBECONFIG`, or `~/.kube/config`)."""
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]


def api_client() -> kubernetes.client.ApiClient:
    """A client on the configuration `load_client_config` set (close it: use `with`)."""
    return kubernetes.client.ApiClient()


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _get(call: Any, *args: Any) -> Any:
    """`call(*args)`, or None when the object does not exist."""
    try:
        return call(*args)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def read_secret(
    api: kubernetes.client.ApiClient, namespace: str, name: str
) -> dict[str, str] | None:
    """The Secret's data, decoded (None: no such Secret)."""
    secret = _get(CoreV1Api(api).read_namespaced_secret, name, namespace)
    if secret is None:
        return None
    data = secret.data or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def read_world(api: kubernetes.client.ApiClient, actor: AsyncActor, namespace: str) -> World:
    """What `actor` (in `namespace`) needs, as the cluster holds it now."""
    custom = CustomObjectsApi(api)
    wanted = placement_flavor(actor)
    flavor = None
    if wanted is not None:
        found = _get(custom.get_cluster_custom_object, GROUP, VERSION, FLAVORS_PLURAL, wanted)
        flavor = None if found is None else msgspec.convert(found, ResourceFlavor)
    listed: dict[str, Any] = custom.list_namespaced_custom_object(  # type: ignore[assignment]
        GROUP, VERSION, namespace, ACTORS_PLURAL
    )
    actors = [
        msgspec.convert(item, AsyncActor)
        for item in listed.get("items", ())
        if not item.get("metadata", {}).get("deletionTimestamp")
    ]
    name = actor.metadata["name"]
    deployment = _get(
        custom.get_namespaced_custom_object, "apps", "v1", namespace, "deployments", name
    )
    return World(
        secret=read_secret(api, namespace, actor.spec.broker.secret_name),
        flavor=flavor,
        actors=actors,
        deployment_status=None if deployment is None else deployment.get("status"),
    )


def apply_object(api: kubernetes.client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    """Create or update `body` (a Deployment or a KEDA object) as planned; the stored object."""
    custom = CustomObjectsApi(api)
    group, version = _split(body["apiVersion"])
    plural = _PLURALS[body["kind"]]
    meta = body["metadata"]
    try:
        applied: dict[str, Any] = custom.patch_namespaced_custom_object(  # type: ignore[assignment]
            group,
            version,
            meta["namespace"],
            plural,
            meta["name"],
            body,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type=_APPLY,
        )
    except ApiException as exc:
        if exc.status != 404:
            raise
        applied = custom.create_namespaced_custom_object(  # type: ignore[assignment]
            group, version, meta["namespace"], plural, body, field_manager=FIELD_MANAGER
        )
    return applied


def apply_objects(
    api: kubernetes.client.ApiClient, bodies: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`apply_object` each of `bodies`, in order; the stored objects."""
    return [apply_object(api, body) for body in bodies]


def write_status(
    api: kubernetes.client.ApiClient, namespace: str, name: str, status: dict[str, Any]
) -> None:
    """Replace the AsyncActor's status fields with `status` (conditions as a whole list)."""
    try:
        CustomObjectsApi(api).patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            ACTORS_PLURAL,
            name,
            {"status": status},
            _content_type=_MERGE,
        )
    except ApiException as exc:
        if exc.status != 404:  # deleted meanwhile: nothing to report on
            raise


def read_actor(api: kubernetes.client.ApiClient, namespace: str, name: str) -> AsyncActor | None:
    """The AsyncActor `namespace/name` (None: no such actor)."""
    found = _get(
        CustomObjectsApi(api).get_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        ACTORS_PLURAL,
        name,
    )
    return None if found is None else msgspec.convert(found, AsyncActor)


def read_admission_world(api: kubernetes.client.ApiClient) -> AdmissionWorld:
    """Every ResourcePool and Cohort, and every AsyncActor with a pool, cluster-wide."""
    custom = CustomObjectsApi(api)

    def listed(plural: str) -> list[dict[str, Any]]:
        found: dict[str, Any] = custom.list_cluster_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, plural
        )
        return list(found.get("items", ()))

    actors = [
        (str(item["metadata"]["namespace"]), msgspec.convert(item, AsyncActor))
        for item in listed(ACTORS_PLURAL)
        if item.get("spec", {}).get("pool") and not item["metadata"].get("deletionTimestamp")
    ]
    return AdmissionWorld(
        pools=[msgspec.convert(item, ResourcePool) for item in listed(POOLS_PLURAL)],
        cohorts=[msgspec.convert(item, Cohort) for item in listed(COHORTS_PLURAL)],
        actors=actors,
        namespace_labels={ns: _namespace_labels(api, ns) for ns in {ns for ns, _ in actors}},
    )


def _namespace_labels(api: kubernetes.client.ApiClient, name: str) -> dict[str, str]:
    found = _get(CoreV1Api(api).read_namespace, name)
    if found is None or found.metadata is None:
        return {}
    return dict(found.metadata.labels or {})


def write_pool_status(api: kubernetes.client.ApiClient, name: str, status: dict[str, Any]) -> None:
    """Replace the ResourcePool's status fields with `status` (lists as a whole)."""
    try:
        CustomObjectsApi(api).patch_cluster_custom_object_status(
            GROUP, VERSION, POOLS_PLURAL, name, {"status": status}, _content_type=_MERGE
        )
    except ApiException as exc:
        if exc.status != 404:  # deleted meanwhile: nothing to report on
            raise
