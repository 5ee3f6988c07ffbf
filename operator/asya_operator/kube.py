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
import os
import secrets
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import kubernetes
from kubernetes.client import ApiException, CoreV1Api, CustomObjectsApi

from asya import typeinfo
from asya_operator.api.actor import AsyncActor
from asya_operator.api.decoding import decodable
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import ActorGroup
from asya_operator.api.metadata import (
    GROUP_COMPONENT,
    GROUP_LABEL,
    INSTANCE_LABEL,
    MANAGED_BY,
    MEMBER_LABEL,
    Owner,
)
from asya_operator.api.pool import Cohort, ResourcePool
from asya_operator.api.template import GROUP, VERSION
from asya_operator.plans.pods import placement_flavor

FIELD_MANAGER: Final = "asya-operator"
"""Who the operator's server-side applies are recorded as."""

ACTORS_PLURAL: Final = "asyncactors"
FLAVORS_PLURAL: Final = "resourceflavors"
POOLS_PLURAL: Final = "resourcepools"
COHORTS_PLURAL: Final = "cohorts"
GROUPS_PLURAL: Final = "actorgroups"

_APPLY: Final = "application/apply-patch+yaml"  # a JSON body is YAML too
_MERGE: Final = "application/merge-patch+json"
_PLURALS: Final = {
    "Deployment": "deployments",
    "ScaledObject": "scaledobjects",
    "TriggerAuthentication": "triggerauthentications",
    "StatefulSet": "statefulsets",
}
_GROUP_OBJECTS: Final = f"app.kubernetes.io/component={GROUP_COMPONENT}"


@dataclasses.dataclass(frozen=True)
class World:
    """What the cluster holds for one AsyncActor."""

    secret: dict[str, str] | None
    """The broker Secret's data, decoded (None: no such Secret)."""
    flavor: ResourceFlavor | None
    """The ResourceFlavor the actor names (None: it names none, or it is not found)."""
    actors: list[AsyncActor]
    """The namespace's AsyncActors that are not being deleted."""
    groups: list[ActorGroup]
    """The namespace's ActorGroups that are not being deleted."""
    deployment_status: dict[str, Any] | None
    """The actor's Deployment's `status` (None: no Deployment yet)."""

    @property
    def owners(self) -> list[Owner]:
        """What owns the namespace's end actors: its AsyncActors and ActorGroups."""
        return [*self.actors, *self.groups]


@dataclasses.dataclass(frozen=True)
class MemberPods:
    """One StatefulSet of a gang instance: one member's pods."""

    name: str
    instance: int
    member: str
    replicas: int
    """Its spec.replicas."""
    ready: int
    """Its status.readyReplicas."""


@dataclasses.dataclass(frozen=True)
class AdmissionWorld:
    """What admission decides over: every pool and cohort, every actor with a pool, every
    ActorGroup and what its instances run."""

    pools: list[ResourcePool]
    cohorts: list[Cohort]
    actors: list[tuple[str, AsyncActor]]
    """(namespace, actor) for each AsyncActor with a pool that is not being deleted."""
    groups: list[tuple[str, ActorGroup]]
    """(namespace, group) for each ActorGroup that is not being deleted."""
    group_pods: dict[tuple[str, str], list[MemberPods]]
    """(namespace, group) -> the StatefulSets the operator made for it."""
    namespace_labels: dict[str, dict[str, str]]
    """The labels of those actors' and groups' namespaces ({} for one that cannot be read)."""
    leaving: list[tuple[str, str, str]]
    """(kind, namespace, name) of every AsyncActor and ActorGroup with a pool being deleted:
    out of every pass, though their pods run until their objects go."""


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


def read_world(api: kubernetes.client.ApiClient, actor: Owner, namespace: str) -> World:
    """What `actor` (an AsyncActor or ActorGroup in `namespace`) needs, as the cluster holds it
    now (an ActorGroup has no flavor of its own, and no Deployment)."""
    custom = CustomObjectsApi(api)
    wanted = placement_flavor(actor) if isinstance(actor, AsyncActor) else None
    flavor = None
    if wanted is not None:
        found = _get(custom.get_cluster_custom_object, GROUP, VERSION, FLAVORS_PLURAL, wanted)
        flavor = None if found is None else typeinfo.convert(found, ResourceFlavor)
    actors = decodable(_live(custom, namespace, ACTORS_PLURAL), AsyncActor)
    groups = decodable(_live(custom, namespace, GROUPS_PLURAL), ActorGroup)
    name = actor.metadata["name"]
    deployment = _get(
        custom.get_namespaced_custom_object, "apps", "v1", namespace, "deployments", name
    )
    return World(
        secret=read_secret(api, namespace, actor.spec.broker.secret_name),
        flavor=flavor,
        actors=actors,
        groups=groups,
        deployment_status=None if deployment is None else deployment.get("status"),
    )


def _live(custom: CustomObjectsApi, namespace: str, plural: str) -> list[dict[str, Any]]:
    """The namespace's objects of ours of `plural` that are not being deleted."""
    listed: dict[str, Any] = custom.list_namespaced_custom_object(  # type: ignore[assignment]
        GROUP, VERSION, namespace, plural
    )
    return [i for i in listed.get("items", ()) if not _is_leaving(i)]


def apply_object(api: kubernetes.client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    """Create or update `body` (a Deployment, StatefulSet, Service or KEDA object) as planned;
    the stored object."""
    meta = body["metadata"]
    if body["kind"] == "Service":
        core = CoreV1Api(api)

        def patch() -> Any:
            return core.patch_namespaced_service(
                meta["name"], meta["namespace"], body, **_APPLY_OPTIONS
            )

        def create() -> Any:
            # The client takes a plain dict as a body too.
            return core.create_namespaced_service(meta["namespace"], body, **_CREATE_OPTIONS)  # type: ignore[arg-type]

        stored: dict[str, Any] = api.sanitize_for_serialization(_apply(patch, create))  # type: ignore[no-untyped-call]
        return stored
    custom = CustomObjectsApi(api)
    group, version = _split(body["apiVersion"])
    where = (group, version, meta["namespace"], _PLURALS[body["kind"]])

    def patch_custom() -> Any:
        return custom.patch_namespaced_custom_object(*where, meta["name"], body, **_APPLY_OPTIONS)

    def create_custom() -> Any:
        return custom.create_namespaced_custom_object(*where, body, **_CREATE_OPTIONS)

    applied: dict[str, Any] = _apply(patch_custom, create_custom)
    return applied


_APPLY_OPTIONS: Final[dict[str, Any]] = {
    "field_manager": FIELD_MANAGER,
    "force": True,
    "_content_type": _APPLY,
}
_CREATE_OPTIONS: Final[dict[str, Any]] = {"field_manager": FIELD_MANAGER}


def _apply(patch: Callable[[], Any], create: Callable[[], Any]) -> Any:
    """Server-side apply; where the server cannot apply to a missing object (404), create it,
    and if another writer created it in between (409), apply again."""
    try:
        return patch()
    except ApiException as exc:
        if exc.status != 404:
            raise
    try:
        return create()
    except ApiException as exc:
        if exc.status != 409:
            raise
    return patch()


def apply_objects(
    api: kubernetes.client.ApiClient, bodies: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`apply_object` each of `bodies`, in order; the stored objects."""
    return [apply_object(api, body) for body in bodies]


def write_status(
    api: kubernetes.client.ApiClient, namespace: str, name: str, status: dict[str, Any]
) -> None:
    """Replace the AsyncActor's status fields with `status` (conditions as a whole list)."""
    _merge_status(api, ACTORS_PLURAL, namespace, name, status)


def _merge_status(
    api: kubernetes.client.ApiClient,
    plural: str,
    namespace: str,
    name: str,
    status: dict[str, Any],
) -> None:
    try:
        CustomObjectsApi(api).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, plural, name, {"status": status}, _content_type=_MERGE
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
    return None if found is None else typeinfo.convert(found, AsyncActor)


def read_admission_world(api: kubernetes.client.ApiClient) -> AdmissionWorld:
    """Every ResourcePool and Cohort, every AsyncActor with a pool and every ActorGroup (with
    its StatefulSets), cluster-wide."""
    custom = CustomObjectsApi(api)

    def everything(plural: str, group: str = GROUP, version: str = VERSION) -> list[dict[str, Any]]:
        found: dict[str, Any] = custom.list_cluster_custom_object(  # type: ignore[assignment]
            group, version, plural
        )
        return list(found.get("items", ()))

    def listed(plural: str, group: str = GROUP, version: str = VERSION) -> list[dict[str, Any]]:
        return [i for i in everything(plural, group, version) if not _is_leaving(i)]

    all_actors, all_groups = everything(ACTORS_PLURAL), everything(GROUPS_PLURAL)
    pooled = [item for item in all_actors if _has_pool(item) and not _is_leaving(item)]
    actors = [(str(a.metadata["namespace"]), a) for a in decodable(pooled, AsyncActor)]
    live_groups = [item for item in all_groups if not _is_leaving(item)]
    groups = [(str(g.metadata["namespace"]), g) for g in decodable(live_groups, ActorGroup)]
    leaving = [
        (kind, str(item["metadata"]["namespace"]), str(item["metadata"]["name"]))
        for kind, items in (("AsyncActor", all_actors), ("ActorGroup", all_groups))
        for item in items
        if _is_leaving(item) and _has_pool(item)
    ]
    spaces = {ns for ns, _ in actors} | {ns for ns, _ in groups}
    return AdmissionWorld(
        pools=[typeinfo.convert(item, ResourcePool) for item in listed(POOLS_PLURAL)],
        cohorts=[typeinfo.convert(item, Cohort) for item in listed(COHORTS_PLURAL)],
        actors=actors,
        groups=groups,
        group_pods=_group_pods(listed("statefulsets", "apps", "v1")),
        namespace_labels={ns: _namespace_labels(api, ns) for ns in spaces},
        leaving=leaving,
    )


def _is_leaving(item: dict[str, Any]) -> bool:
    return bool(item.get("metadata", {}).get("deletionTimestamp"))


def _has_pool(item: dict[str, Any]) -> bool:
    return bool(item.get("spec", {}).get("pool"))


def _ours(item: dict[str, Any]) -> bool:
    # Label selectors are applied here too: the tests' stand-in API server ignores them.
    labels = item["metadata"].get("labels") or {}
    return (
        labels.get("app.kubernetes.io/component") == GROUP_COMPONENT
        and labels.get("app.kubernetes.io/managed-by") == MANAGED_BY
        and GROUP_LABEL in labels
        and INSTANCE_LABEL in labels
    )


def _group_pods(items: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[MemberPods]]:
    found: dict[tuple[str, str], list[MemberPods]] = {}
    for item in items:
        if not _ours(item) or MEMBER_LABEL not in item["metadata"]["labels"]:
            continue
        meta, labels = item["metadata"], item["metadata"]["labels"]
        key = (str(meta["namespace"]), str(labels[GROUP_LABEL]))
        found.setdefault(key, []).append(
            MemberPods(
                name=str(meta["name"]),
                instance=int(labels[INSTANCE_LABEL]),
                member=str(labels[MEMBER_LABEL]),
                replicas=int(item.get("spec", {}).get("replicas") or 0),
                ready=int((item.get("status") or {}).get("readyReplicas") or 0),
            )
        )
    return found


def read_group_objects(
    api: kubernetes.client.ApiClient, namespace: str, group: str
) -> list[tuple[str, str, int]]:
    """(kind, name, instance) of every StatefulSet and Service the operator made for `group`."""
    custom, core = CustomObjectsApi(api), CoreV1Api(api)
    sets: dict[str, Any] = custom.list_namespaced_custom_object(  # type: ignore[assignment]
        "apps", "v1", namespace, "statefulsets", label_selector=_GROUP_OBJECTS
    )
    services = api.sanitize_for_serialization(  # type: ignore[no-untyped-call]
        core.list_namespaced_service(namespace, label_selector=_GROUP_OBJECTS)
    )
    found = []
    for kind, items in (("StatefulSet", sets.get("items", ())), ("Service", services["items"])):
        for item in items:
            labels = item["metadata"].get("labels") or {}
            if _ours(item) and labels[GROUP_LABEL] == group:
                found.append((kind, str(item["metadata"]["name"]), int(labels[INSTANCE_LABEL])))
    return found


def delete_object(api: kubernetes.client.ApiClient, kind: str, namespace: str, name: str) -> None:
    """Delete a StatefulSet or Service the operator made (gone already: nothing to do). Its
    pods stop gracefully: their sidecars drain, as on any scale-down."""
    try:
        if kind == "Service":
            CoreV1Api(api).delete_namespaced_service(name, namespace)
        else:
            CustomObjectsApi(api).delete_namespaced_custom_object(
                "apps", "v1", namespace, _PLURALS[kind], name
            )
    except ApiException as exc:
        if exc.status != 404:
            raise


def scale_down_deployment(
    api: kubernetes.client.ApiClient, namespace: str, name: str, replicas: int
) -> None:
    """Set a Deployment's `spec.replicas` to `replicas` if it has more (gone: nothing to do);
    returns once the API server has stored it."""
    custom = CustomObjectsApi(api)
    where = ("apps", "v1", namespace, _PLURALS["Deployment"], name)
    found = _get(custom.get_namespaced_custom_object, *where)
    if found is None or int(found.get("spec", {}).get("replicas") or 0) <= replicas:
        return
    patch = {"spec": {"replicas": replicas}}
    custom.patch_namespaced_custom_object(*where, patch, _content_type=_MERGE)


def read_group(api: kubernetes.client.ApiClient, namespace: str, name: str) -> ActorGroup | None:
    """The ActorGroup `namespace/name` (None: no such group)."""
    found = _get(
        CustomObjectsApi(api).get_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        GROUPS_PLURAL,
        name,
    )
    return None if found is None else typeinfo.convert(found, ActorGroup)


def write_group_status(
    api: kubernetes.client.ApiClient, namespace: str, name: str, status: dict[str, Any]
) -> None:
    """Replace the ActorGroup's status fields with `status` (lists as a whole)."""
    _merge_status(api, GROUPS_PLURAL, namespace, name, status)


def read_flavors(
    api: kubernetes.client.ApiClient, names: Iterable[str]
) -> dict[str, ResourceFlavor]:
    """The ResourceFlavors of those `names` that exist."""
    custom = CustomObjectsApi(api)
    found = {}
    for name in sorted(set(names)):
        body = _get(custom.get_cluster_custom_object, GROUP, VERSION, FLAVORS_PLURAL, name)
        if body is not None:
            found[name] = typeinfo.convert(body, ResourceFlavor)
    return found


def list_actor_names(api: kubernetes.client.ApiClient, namespace: str) -> set[str]:
    """The names of the namespace's AsyncActors."""
    listed: dict[str, Any] = CustomObjectsApi(api).list_namespaced_custom_object(  # type: ignore[assignment]
        GROUP, VERSION, namespace, ACTORS_PLURAL
    )
    return {str(item["metadata"]["name"]) for item in listed.get("items", ())}


def post_event(
    api: kubernetes.client.ApiClient, owner: Owner, *, warning: bool, reason: str, message: str
) -> None:
    """A Kubernetes Event about `owner` (`kubectl describe` and `kubectl events` show it)."""
    body = {"apiVersion": owner.api_version, "kind": owner.kind, "metadata": owner.metadata}
    post_event_on(api, body, warning=warning, reason=reason, message=message)


def post_event_on(
    api: kubernetes.client.ApiClient,
    body: Mapping[str, Any],
    *,
    warning: bool,
    reason: str,
    message: str,
) -> None:
    """A Kubernetes Event about the object `body` as stored (one that may not even decode)."""
    meta = body["metadata"]
    namespace = str(meta.get("namespace") or "default")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {
        "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": body.get("apiVersion"),
            "kind": body.get("kind"),
            "name": meta["name"],
            "namespace": namespace,
            "uid": meta.get("uid"),
        },
        "type": "Warning" if warning else "Normal",
        "reason": reason,
        "message": message[:1024],
        "source": {"component": FIELD_MANAGER},
        "reportingComponent": FIELD_MANAGER,
        "reportingInstance": os.uname().nodename,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    CoreV1Api(api).create_namespaced_event(namespace, event)  # type: ignore[arg-type]


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
