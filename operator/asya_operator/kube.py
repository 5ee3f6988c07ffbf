"""The operator's one cluster client: reads and writes of the cluster, async, over a table of
kinds.

I/O only, no decisions: read a custom resource (decoded and checked one at a time: one the
operator cannot take is a `StoredSpecError` for that object alone), what an actor needs (its
broker Secret, its flavor, the namespace's other actors and groups), what admission decides
over; apply the objects the plans made, patch a status, scale a Deployment down, delete a
group's objects, post an Event. `Kube`'s methods run the synchronous official client on the
operator's own worker threads (`API_THREADS` of them, each with a client and its connections
kept), so the event loop never blocks on the API server; every kind is a row of `KINDS`
(group, version, plural, scope, model), so one method serves them all.

Objects are applied with server-side apply (field manager `asya-operator`, forced): on a real
cluster a field the plan no longer sets is removed, and list items (containers, env) are
replaced, not merged. An API server that cannot apply to a missing object (the tests' stand-in)
answers 404, and the object is then created.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import dataclasses
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import kubernetes
import msgspec
from kubernetes.client import ApiClient, ApiException, CoreV1Api, CustomObjectsApi

from asya_operator.api.actor import AsyncActor
from asya_operator.api.decoding import StoredSpecError, decodable, decode
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import ActorGroup
from asya_operator.api.metadata import (
    GROUP_COMPONENT,
    GROUP_LABEL,
    INSTANCE_LABEL,
    MANAGED_BY,
    MEMBER_LABEL,
    TEMPLATE_HASH_LABEL,
    Owner,
)
from asya_operator.api.pool import Cohort, ResourcePool
from asya_operator.api.template import GROUP, VERSION
from asya_operator.config import GangScheduler
from asya_operator.plans.gangs import GANG_KINDS, GANG_SCHEDULER_LABEL, unplaced_reason
from asya_operator.plans.names import NameOwner
from asya_operator.plans.nodes import Node, node_of
from asya_operator.plans.pods import placement_flavor
from asya_operator.plans.pools import DEFAULT_POOL_LABEL, with_effective_pool
from asya_operator.plans.statuses import StatusPatch

T = TypeVar("T")

_log = logging.getLogger(__name__)

FIELD_MANAGER: Final = "asya-operator"
"""Who the operator's server-side applies are recorded as."""

CALL_TIMEOUT_S: Final = 60.0
"""The default longest wait of one call to the API server (`OperatorConfig.api_timeout_s`)."""

API_THREADS: Final = 16
"""The default number of calls to the API server made at once (`OperatorConfig.api_threads`)."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """Where the API keeps one kind of object."""

    group: str
    """API group ("" for the core group)."""
    version: str
    plural: str
    namespaced: bool


def _pod_group_key(group: str) -> str:
    """A gang scheduler's PodGroup's key in `KINDS`: the kind name alone is in three groups."""
    return f"PodGroup.{group}"


KINDS: Final[dict[str, Kind]] = {
    "AsyncActor": Kind(GROUP, VERSION, "asyncactors", namespaced=True),
    "ActorGroup": Kind(GROUP, VERSION, "actorgroups", namespaced=True),
    "ResourceFlavor": Kind(GROUP, VERSION, "resourceflavors", namespaced=False),
    "ResourcePool": Kind(GROUP, VERSION, "resourcepools", namespaced=False),
    "Cohort": Kind(GROUP, VERSION, "cohorts", namespaced=False),
    "Deployment": Kind("apps", "v1", "deployments", namespaced=True),
    "StatefulSet": Kind("apps", "v1", "statefulsets", namespaced=True),
    "ScaledObject": Kind("keda.sh", "v1alpha1", "scaledobjects", namespaced=True),
    "TriggerAuthentication": Kind("keda.sh", "v1alpha1", "triggerauthentications", namespaced=True),
    "Service": Kind("", "v1", "services", namespaced=True),
    "Workload": Kind("kueue.x-k8s.io", "v1beta2", "workloads", namespaced=True),
    **{
        _pod_group_key(gang.group): Kind(gang.group, gang.version, gang.plural, namespaced=True)
        for gang in GANG_KINDS.values()
    },
}
"""Every kind the operator reads or writes, by kind name; a gang scheduler's PodGroup (one kind
name in three API groups) as `PodGroup.{group}`."""

GANG_KEYS: Final[dict[GangScheduler, str]] = {
    scheduler: _pod_group_key(gang.group) for scheduler, gang in GANG_KINDS.items()
}
"""Each gang scheduler's PodGroup, as its key in `KINDS`."""
_GANG_KINDS: Final = frozenset(KINDS[key] for key in GANG_KEYS.values())

_MODELS: Final[dict[type[Any], str]] = {
    AsyncActor: "AsyncActor",
    ActorGroup: "ActorGroup",
    ResourceFlavor: "ResourceFlavor",
    ResourcePool: "ResourcePool",
    Cohort: "Cohort",
}

_APPLY: Final = "application/apply-patch+yaml"  # a JSON body is YAML too
_MERGE: Final = "application/merge-patch+json"
_GROUP_OBJECTS: Final = f"app.kubernetes.io/component={GROUP_COMPONENT}"
_OURS: Final = f"app.kubernetes.io/managed-by={MANAGED_BY}"
RESTARTED_ANNOTATION: Final = "asya.sh/restarted-for"
"""On a Deployment's pod template: why its pods were last rolled by the operator (a broker
credential rotation's request), as `kubectl.kubernetes.io/restartedAt` says for kubectl."""
RESTART_FIELD_MANAGER: Final = "asya-operator-restart"
"""The field manager of that annotation: not the operator's applies' own, which would drop it."""
# Strict: a field the API server does not know fails the request, naming it, instead of being
# dropped with a warning nobody reads (a misspelt field in a free-form volume source, say).
_APPLY_OPTIONS: Final[dict[str, Any]] = {
    "field_manager": FIELD_MANAGER,
    "field_validation": "Strict",
    "force": True,
    "_content_type": _APPLY,
}
_CREATE_OPTIONS: Final[dict[str, Any]] = {
    "field_manager": FIELD_MANAGER,
    "field_validation": "Strict",
}


@dataclasses.dataclass(frozen=True)
class NameOwners:
    """A namespace's AsyncActors and ActorGroups, as the actor names they run as need them
    (`plans.names`)."""

    staying: list[NameOwner]
    """Those not being deleted."""
    leaving: list[NameOwner]
    """Those being deleted: each keeps its actor names until it is gone."""

    @property
    def everyone(self) -> list[NameOwner]:
        """Both: who keeps each name is decided among all of them (`names.name_keepers`)."""
        return [*self.staying, *self.leaving]


@dataclasses.dataclass(frozen=True)
class World:
    """What the cluster holds for one AsyncActor or ActorGroup."""

    secret: dict[str, str] | None
    """The broker Secret's data, decoded (None: no such Secret)."""
    flavor: ResourceFlavor | None
    """The ResourceFlavor the actor names (None: it names none, or it is not found)."""
    actors: list[AsyncActor]
    """The namespace's AsyncActors that are not being deleted."""
    groups: list[ActorGroup]
    """The namespace's ActorGroups that are not being deleted."""
    leaving: list[NameOwner]
    """The namespace's AsyncActors and ActorGroups being deleted."""
    deployment_status: dict[str, Any] | None
    """The actor's Deployment's `status` (None: no Deployment yet)."""

    @property
    def owners(self) -> list[Owner]:
        """What owns the namespace's end actors: its AsyncActors and ActorGroups."""
        return [*self.actors, *self.groups]

    @property
    def name_owners(self) -> NameOwners:
        """The namespace's AsyncActors and ActorGroups, as their actor names need them."""
        return NameOwners(staying=[*self.actors, *self.groups], leaving=self.leaving)

    @property
    def secret_keys(self) -> set[str] | None:
        """The broker Secret's keys (None: no such Secret)."""
        return None if self.secret is None else set(self.secret)


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
    gang_scheduler: str = "none"
    """The gang scheduler its pods were made for (`plans.gangs.GANG_SCHEDULER_LABEL`; none
    before the label existed)."""
    template_hash: str | None = None
    """The hash of the pod template it runs (`plans.group_objects.TEMPLATE_HASH_LABEL`; None
    before the label existed)."""


@dataclasses.dataclass(frozen=True)
class AdmissionWorld:
    """What admission decides over: every pool and cohort, every actor with a pool, every
    ActorGroup and what its instances run."""

    pools: list[ResourcePool]
    cohorts: list[Cohort]
    actors: list[tuple[str, AsyncActor]]
    """(namespace, actor) for each AsyncActor with a pool, its own or its namespace's default
    (set in `spec.pool`), that is not being deleted."""
    groups: list[tuple[str, ActorGroup]]
    """(namespace, group) for each ActorGroup that is not being deleted, with its effective
    pool in `spec.pool`."""
    group_pods: dict[tuple[str, str], list[MemberPods]]
    """(namespace, group) -> the StatefulSets the operator made for it."""
    namespace_labels: dict[str, dict[str, str]]
    """The labels of those actors' and groups' namespaces ({} for one that cannot be read)."""
    leaving: list[tuple[str, str, str]]
    """(kind, namespace, name) of every AsyncActor and ActorGroup with a pool (its own or its
    namespace's default) being deleted: out of every pass, though their pods run until their
    objects go."""
    nodes: list[Node] | None
    """The cluster's Nodes (None: they could not be listed, forbidden or failed): what the
    statuses name when a flavor's nodes advertise no accelerator, never what admits."""


@dataclasses.dataclass(frozen=True)
class KueueWorkloads:
    """Kueue's Workloads, as the operator could read them."""

    items: dict[tuple[str, str], dict[str, Any]] | None
    """(namespace, name) -> Workload (None: not read)."""
    served: bool
    """The cluster serves Workloads (False: Kueue is not installed)."""
    unreadable: str | None = None
    """Why they could not be read though served (forbidden, the API failing): unknown."""


@dataclasses.dataclass(frozen=True)
class GangStates:
    """What the gang schedulers' PodGroups say."""

    served: set[GangScheduler]
    """The gang schedulers whose PodGroup kind the cluster serves (of those asked about)."""
    unplaced: dict[tuple[str, str, int], str]
    """(namespace, group, instance) -> why its scheduler cannot place it whole, in the
    scheduler's words (`plans.gangs.unplaced_reason`)."""


Scope = tuple[str, ...] | None
"""The namespaces the operator watches; None: every namespace."""


class Kube:
    """The cluster, as the operator reads and writes it (see the module docstring).

    `namespaces` are those the operator watches (none: every namespace): admission then
    decides over their actors and groups only, each listed in its namespace, as an operator
    given a Role in each may neither read nor write another's (its pools are to be its own;
    docs/kubernetes.md)."""

    def __init__(
        self, *namespaces: str, timeout_s: float = CALL_TIMEOUT_S, threads: int = API_THREADS
    ) -> None:
        self._scope: Scope = tuple(namespaces) or None
        self._timeout_s = timeout_s
        self._nodes_unread = False
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="asya-kube"
        )
        self._clients = _ThreadClients(timeout_s)

    async def connect(self) -> None:
        """Point the official client at the cluster: in a pod its service account, else the
        kubeconfig (`KUBECONFIG`, or `~/.kube/config`)."""
        await asyncio.to_thread(_load_client_config)

    async def close(self) -> None:
        """Drop the calls still queued, wait for those under way (each bounded by its socket
        timeout) and close the threads' clients."""
        await asyncio.to_thread(self._threads.shutdown, wait=True, cancel_futures=True)
        self._clients.close()

    async def _call(self, call: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        started = asyncio.Event()

        def run() -> T:
            loop.call_soon_threadsafe(started.set)
            return call(self._clients.mine(), *args)

        submitted = self._threads.submit(run)
        done = asyncio.wrap_future(submitted)
        # The bound is on the API server, not on the queue for a thread: a burst queues calls
        # behind each other, and a call that waited its turn is no call the server failed. A
        # call whose caller gives up while it waits is never made.
        starting = asyncio.ensure_future(started.wait())
        try:
            await asyncio.wait((starting, done), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            submitted.cancel()  # at once: a thread freed next must not take it
            done.cancel()
            raise
        finally:
            starting.cancel()
        # Bounded twice: an API server that never answers fails the caller (a pass is tried
        # again) instead of holding the admission loop, and the worker thread's socket gives
        # up too, so the thread ends instead of holding the operator's stop for ever.
        async with asyncio.timeout(self._timeout_s):
            return await done

    async def read(self, model: type[T], namespace: str | None, name: str) -> T | None:
        """The custom resource `model` (AsyncActor, ActorGroup, ...) `namespace/name` as stored
        now (None: there is none).

        Raises:
            StoredSpecError: it is stored, but the operator cannot take it (the message names
                the field).
        """
        return await self._call(_read, model, namespace, name)

    async def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """The Secret's data, decoded (None: no such Secret)."""
        return await self._call(_read_secret, namespace, name)

    async def read_secret_parts(
        self, namespace: str, name: str
    ) -> tuple[dict[str, str], dict[str, str], dict[str, str]] | None:
        """The Secret's labels, annotations and data (decoded), from one read (None: no such
        Secret)."""
        return await self._call(_read_secret_parts, namespace, name)

    async def create_secret(
        self, namespace: str, name: str, labels: Mapping[str, str], data: Mapping[str, str]
    ) -> bool:
        """Create a Secret of `data` (plain text); False when one of that name exists."""
        return await self._call(_create_secret, namespace, name, dict(labels), dict(data))

    async def patch_secret(
        self,
        namespace: str,
        name: str,
        data: Mapping[str, str],
        annotations: Mapping[str, str],
    ) -> None:
        """Merge `data` (plain text) and `annotations` into a Secret."""
        await self._call(_patch_secret, namespace, name, dict(data), dict(annotations))

    async def restart_deployments(self, namespace: str, secret: str, value: str) -> list[str]:
        """Roll every Deployment the operator made in `namespace` whose pods read the broker
        Secret `secret`, as `kubectl rollout restart` does: a pod template annotation
        (`RESTARTED_ANNOTATION` = `value`) written by a field manager of its own, so that the
        operator's applies, which never name it, leave it. The names restarted."""
        return await self._call(_restart_deployments, namespace, secret, value)

    async def delete_secret(self, namespace: str, name: str) -> None:
        """Delete a Secret (gone already: nothing to do)."""
        await self._call(_delete_secret, namespace, name)

    async def read_flavors(self, names: Iterable[str]) -> dict[str, ResourceFlavor]:
        """The ResourceFlavors of those `names` that exist."""
        return await self._call(_read_flavors, sorted(set(names)))

    async def name_owners(self, namespace: str) -> NameOwners:
        """The namespace's AsyncActors and ActorGroups (those that decode)."""
        return await self._call(_name_owners, namespace)

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        """The labels of the Namespace `namespace` ({} when it cannot be read)."""
        return await self._call(_namespace_labels, namespace)

    async def world(self, owner: AsyncActor | ActorGroup, namespace: str) -> World:
        """What `owner` needs, as the cluster holds it now (an ActorGroup has no flavor of its
        own, and no Deployment)."""
        return await self._call(_read_world, owner, namespace)

    async def admission_world(self) -> AdmissionWorld:
        """Every ResourcePool and Cohort, every AsyncActor with a pool and every ActorGroup
        (with its StatefulSets), cluster-wide, or in the watched namespace; each with its
        effective pool in `spec.pool` (its namespace's default pool where it names none:
        `pools.with_effective_pool`); and the cluster's Nodes (`read_nodes`)."""
        nodes = await self.read_nodes()
        return await self._call(_read_admission_world, self._scope, nodes)

    async def read_nodes(self) -> list[Node] | None:
        """The cluster's Nodes; None when they cannot be listed (no RBAC on nodes, the API
        server's error): a report is then left unsaid, never a pass failed. Logged once, when
        listing starts to fail."""
        try:
            nodes = await self._call(_list_nodes)
        except Exception as exc:  # whatever the API server answers: unknown, not fatal
            if not self._nodes_unread:
                _log.warning("nodes not listed", extra={"error": str(exc)})
            self._nodes_unread = True
            return None
        if self._nodes_unread:
            _log.info("nodes listed again")
        self._nodes_unread = False
        return nodes

    async def apply(self, bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create or update each of `bodies` (Deployments, StatefulSets, Services, KEDA
        objects), in order; the stored objects.

        Raises:
            ApplyRefusedError: the API server refused one as invalid (400, 422): trying again
                as it is cannot help.
        """
        return await self._call(_apply_objects, list(bodies))

    async def patch_status(
        self, model: type[Any], namespace: str | None, name: str, patch: StatusPatch[Any]
    ) -> None:
        """Merge `patch` (the fields its writer owns) into the custom resource's status (lists,
        conditions among them, as a whole); one deleted meanwhile is left alone."""
        document = patch.document()
        await self._call(_patch_status, KINDS[_MODELS[model]], namespace, name, document)

    async def scale_down(self, namespace: str, name: str, replicas: int) -> None:
        """Set the Deployment's `spec.replicas` to `replicas` if it has more (gone: nothing to
        do); returns once the API server has stored it."""
        await self._call(_scale_down, namespace, name, replicas)

    async def group_objects(self, namespace: str, group: str) -> list[tuple[str, str, int]]:
        """(kind, name, instance) of every StatefulSet, Service and gang PodGroup the operator
        made for the ActorGroup `namespace/group`."""
        return await self._call(_group_objects, namespace, group)

    async def kueue_workloads(self) -> KueueWorkloads:
        """Kueue's Workloads in the operator's scope."""
        return await self._call(_kueue_workloads, self._scope)

    async def gang_states(self, schedulers: Collection[GangScheduler]) -> GangStates:
        """Which of `schedulers` the cluster serves the PodGroups of, and what they say of the
        instances they cannot place whole."""
        if not schedulers:
            return GangStates(served=set(), unplaced={})
        return await self._call(_gang_states, self._scope, sorted(schedulers))

    async def delete(self, namespace: str, objects: Collection[tuple[str, str]]) -> None:
        """Delete each (kind, name) of `namespace` the operator made (a StatefulSet, a Service,
        a gang's PodGroup; gone already, or a kind not served: nothing to do). Pods stop
        gracefully: their sidecars drain."""
        if objects:
            await self._call(_delete_objects, namespace, list(objects))

    async def delete_group_objects(self, namespace: str, group: str) -> None:
        """Delete every StatefulSet, Service and gang PodGroup the operator made for
        `namespace/group`."""
        found = await self.group_objects(namespace, group)
        await self.delete(namespace, [(kind, name) for kind, name, _instance in found])

    async def post_event(
        self, about: Owner | Mapping[str, Any], *, warning: bool, reason: str, message: str
    ) -> None:
        """Post a Kubernetes Event about `about` (a CR, typed or as stored: one that may not
        even decode); `kubectl describe` and `kubectl events` show it. A failure is logged,
        never raised: an Event is a report, not a decision."""
        if isinstance(about, Mapping):
            body: Mapping[str, Any] = about
        else:
            body = {"apiVersion": about.api_version, "kind": about.kind, "metadata": about.metadata}
        try:
            await self._call(_post_event, body, warning, reason, message)
        except Exception as exc:  # the API server's answer, whatever it is: reported, not fatal
            name = body.get("metadata", {}).get("name")
            _log.warning("event not posted", extra={"reason": reason, "object": name, "error": exc})


class _BoundedApiClient(ApiClient):
    """The official client with a socket timeout (connect, and each read) on every request that
    names none: its default is to wait for ever."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__()
        self._timeout_s = timeout_s

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["_request_timeout"] = kwargs.get("_request_timeout") or (
            self._timeout_s,
            self._timeout_s,
        )
        return super().call_api(*args, **kwargs)


class _ThreadClients:
    """One `_BoundedApiClient` per worker thread, made on its first call and kept: its
    connections to the API server are reused by the thread's next calls (a new client per call
    is a new connection, and a TLS handshake, per call)."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._local = threading.local()
        self._made: list[_BoundedApiClient] = []
        self._lock = threading.Lock()

    def mine(self) -> _BoundedApiClient:
        client: _BoundedApiClient | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = _BoundedApiClient(self._timeout_s)
            with self._lock:
                self._made.append(client)
        return client

    def close(self) -> None:
        with self._lock:
            made, self._made = self._made, []
        for client in made:
            client.close()  # type: ignore[no-untyped-call]


def _load_client_config() -> None:
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]


def _get(call: Any, *args: Any) -> Any:
    """`call(*args)`, or None when the object does not exist."""
    try:
        return call(*args)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _in(kind: Kind, namespace: str) -> tuple[str, str, str, str]:
    """Where a namespaced kind's objects of `namespace` are, as the custom-objects API takes it."""
    return (kind.group, kind.version, namespace, kind.plural)


def _cluster(kind: Kind) -> tuple[str, str, str]:
    """Where a cluster-scoped kind's objects are, as the custom-objects API takes it."""
    return (kind.group, kind.version, kind.plural)


def _get_custom(api: ApiClient, kind: Kind, namespace: str | None, name: str) -> Any:
    custom = CustomObjectsApi(api)
    if namespace is not None:
        return _get(custom.get_namespaced_custom_object, *_in(kind, namespace), name)
    return _get(custom.get_cluster_custom_object, *_cluster(kind), name)


def _read(api: ApiClient, model: type[T], namespace: str | None, name: str) -> T | None:
    found = _get_custom(api, KINDS[_MODELS[model]], namespace, name)
    return None if found is None else decode(found, model)


def _read_secret(api: ApiClient, namespace: str, name: str) -> dict[str, str] | None:
    secret = _get(CoreV1Api(api).read_namespaced_secret, name, namespace)
    if secret is None:
        return None
    data = secret.data or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def _read_secret_parts(
    api: ApiClient, namespace: str, name: str
) -> tuple[dict[str, str], dict[str, str], dict[str, str]] | None:
    secret = _get(CoreV1Api(api).read_namespaced_secret, name, namespace)
    if secret is None:
        return None
    data = {key: base64.b64decode(value).decode() for key, value in (secret.data or {}).items()}
    return dict(secret.metadata.labels or {}), dict(secret.metadata.annotations or {}), data


def _create_secret(
    api: ApiClient, namespace: str, name: str, labels: dict[str, str], data: dict[str, str]
) -> bool:
    encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    body: Any = {"metadata": {"name": name, "labels": labels}, "data": encoded}
    try:
        CoreV1Api(api).create_namespaced_secret(namespace, body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        return False
    return True


def _patch_secret(
    api: ApiClient, namespace: str, name: str, data: dict[str, str], annotations: dict[str, str]
) -> None:
    encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
    body: Any = {"metadata": {"annotations": annotations}, "data": encoded}
    CoreV1Api(api).patch_namespaced_secret(name, namespace, body)


def _restart_deployments(api: ApiClient, namespace: str, secret: str, value: str) -> list[str]:
    custom = CustomObjectsApi(api)
    listed: Any = custom.list_namespaced_custom_object(
        "apps", "v1", namespace, "deployments", label_selector=_OURS
    )
    restarted = []
    for item in listed.get("items") or ():
        pod = item.get("spec", {}).get("template", {}).get("spec", {})
        reads = {
            (env.get("valueFrom") or {}).get("secretKeyRef", {}).get("name")
            for container in pod.get("containers") or ()
            for env in container.get("env") or ()
        }
        if secret not in reads:
            continue
        name = item["metadata"]["name"]
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_ANNOTATION: value}}}}}
        custom.patch_namespaced_custom_object(
            "apps",
            "v1",
            namespace,
            "deployments",
            name,
            patch,
            _content_type=_MERGE,
            field_manager=RESTART_FIELD_MANAGER,
        )
        restarted.append(str(name))
    return restarted


def _delete_secret(api: ApiClient, namespace: str, name: str) -> None:
    try:
        CoreV1Api(api).delete_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _read_flavors(api: ApiClient, names: Iterable[str]) -> dict[str, ResourceFlavor]:
    found = {}
    for name in names:
        try:
            flavor = _read(api, ResourceFlavor, None, name)
        except StoredSpecError as exc:  # as if missing: what names it says so, alone
            _log.warning("flavor left out", extra={"object": name, "error": str(exc)})
            continue
        if flavor is not None:
            found[name] = flavor
    return found


def _list(
    api: ApiClient, kind: Kind, namespace: str | Scope = None, selector: str | None = None
) -> list[dict[str, Any]]:
    """`kind`'s objects in `namespace`, in each of several, or in every one (None)."""
    if isinstance(namespace, tuple):
        return [item for each in namespace for item in _list(api, kind, each, selector)]
    custom = CustomObjectsApi(api)
    listed: dict[str, Any]
    if namespace is None:
        listed = custom.list_cluster_custom_object(  # type: ignore[assignment]
            kind.group, kind.version, kind.plural, label_selector=selector
        )
    else:
        listed = custom.list_namespaced_custom_object(  # type: ignore[assignment]
            kind.group, kind.version, namespace, kind.plural, label_selector=selector
        )
    return list(listed.get("items", ()))


def _name_owners(api: ApiClient, namespace: str) -> NameOwners:
    actors = _list(api, KINDS["AsyncActor"], namespace)
    groups = _list(api, KINDS["ActorGroup"], namespace)
    owners: list[NameOwner] = [*decodable(actors, AsyncActor), *decodable(groups, ActorGroup)]
    return NameOwners(
        staying=[o for o in owners if not o.metadata.get("deletionTimestamp")],
        leaving=[o for o in owners if o.metadata.get("deletionTimestamp")],
    )


def _read_world(api: ApiClient, owner: AsyncActor | ActorGroup, namespace: str) -> World:
    wanted = placement_flavor(owner) if isinstance(owner, AsyncActor) else None
    flavor = None if wanted is None else _read(api, ResourceFlavor, None, wanted)
    names = _name_owners(api, namespace)
    deployment = _get_custom(api, KINDS["Deployment"], namespace, owner.metadata["name"])
    return World(
        secret=_read_secret(api, namespace, owner.spec.broker.secret_name),
        flavor=flavor,
        actors=[o for o in names.staying if isinstance(o, AsyncActor)],
        groups=[o for o in names.staying if isinstance(o, ActorGroup)],
        leaving=names.leaving,
        deployment_status=None if deployment is None else deployment.get("status"),
    )


def _list_nodes(api: ApiClient) -> list[Node]:
    # The raw JSON, not the client's models: a Node's status (its images) is large, and the
    # models are slow to build.
    response: Any = CoreV1Api(api).list_node(_preload_content=False)
    listed = msgspec.json.decode(response.data)
    return [node_of(item) for item in listed.get("items") or ()]


def _read_admission_world(
    api: ApiClient, namespace: Scope, nodes: list[Node] | None
) -> AdmissionWorld:
    def live(kind: str) -> list[dict[str, Any]]:
        scope = namespace if KINDS[kind].namespaced else None
        return [i for i in _list(api, KINDS[kind], scope) if not _is_leaving(i)]

    all_actors = _list(api, KINDS["AsyncActor"], namespace)
    all_groups = _list(api, KINDS["ActorGroup"], namespace)
    spaces = {str(i["metadata"]["namespace"]) for i in (*all_actors, *all_groups)}
    labels = {ns: _namespace_labels(api, ns) for ns in spaces}

    def has_pool(item: Mapping[str, Any]) -> bool:
        # Its own pool, or its namespace's default (`pools.effective_pool`).
        spec, namespace = item.get("spec") or {}, str(item["metadata"]["namespace"])
        return bool(spec.get("pool") or labels[namespace].get(DEFAULT_POOL_LABEL))

    pooled = [item for item in all_actors if has_pool(item) and not _is_leaving(item)]
    actors = [
        (str(a.metadata["namespace"]), with_effective_pool(a, labels[a.metadata["namespace"]]))
        for a in decodable(pooled, AsyncActor)
    ]
    live_groups = [item for item in all_groups if not _is_leaving(item)]
    groups = [
        (str(g.metadata["namespace"]), with_effective_pool(g, labels[g.metadata["namespace"]]))
        for g in decodable(live_groups, ActorGroup)
    ]
    leaving = [
        (kind, str(item["metadata"]["namespace"]), str(item["metadata"]["name"]))
        for kind, items in (("AsyncActor", all_actors), ("ActorGroup", all_groups))
        for item in items
        if _is_leaving(item) and has_pool(item)
    ]
    return AdmissionWorld(
        pools=decodable(live("ResourcePool"), ResourcePool),
        cohorts=decodable(live("Cohort"), Cohort),
        actors=actors,
        groups=groups,
        group_pods=_group_pods(live("StatefulSet")),
        namespace_labels={ns: labels[ns] for ns, _ in (*actors, *groups)},
        leaving=leaving,
        nodes=nodes,
    )


def kind_key(body: Mapping[str, Any]) -> str:
    """The key in `KINDS` of an object body: its kind, qualified by its API group where the
    kind name alone is ambiguous (PodGroup)."""
    if body["kind"] == "PodGroup":
        return _pod_group_key(str(body["apiVersion"]).split("/")[0])
    return str(body["kind"])


def _is_leaving(item: Mapping[str, Any]) -> bool:
    return bool(item.get("metadata", {}).get("deletionTimestamp"))


def _ours(item: Mapping[str, Any]) -> bool:
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
                gang_scheduler=str(labels.get(GANG_SCHEDULER_LABEL, "none")),
                template_hash=labels.get(TEMPLATE_HASH_LABEL),
            )
        )
    return found


class ApplyRefusedError(Exception):
    """The API server refused an object the operator wrote as invalid (400, 422: a field it does
    not know under strict field validation, a value it refuses); the message is its own."""


_REFUSED: Final = (400, 422)


def _apply_objects(api: ApiClient, bodies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    applied = []
    for body in bodies:
        try:
            applied.append(_apply_object(api, body))
        except ApiException as exc:
            if exc.status not in _REFUSED:
                raise
            meta = body["metadata"]
            raise ApplyRefusedError(
                f"{body['kind']} {meta['name']} refused by the API server: {_message(exc)}"
            ) from exc
    return applied


def _message(exc: ApiException) -> str:
    """The API server's own message in an error's body (a Status), else the error's reason."""
    try:
        status = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return str(exc.reason)
    return str(status.get("message") or exc.reason) if isinstance(status, dict) else str(exc.reason)


def _apply_object(api: ApiClient, body: dict[str, Any]) -> dict[str, Any]:
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
    where = _in(KINDS[kind_key(body)], meta["namespace"])

    def patch_custom() -> Any:
        return custom.patch_namespaced_custom_object(*where, meta["name"], body, **_APPLY_OPTIONS)

    def create_custom() -> Any:
        return custom.create_namespaced_custom_object(*where, body, **_CREATE_OPTIONS)

    applied: dict[str, Any] = _apply(patch_custom, create_custom)
    return applied


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


def _patch_status(
    api: ApiClient, kind: Kind, namespace: str | None, name: str, status: dict[str, Any]
) -> None:
    custom = CustomObjectsApi(api)
    body = {"status": status}
    try:
        if namespace is not None:
            custom.patch_namespaced_custom_object_status(
                *_in(kind, namespace), name, body, _content_type=_MERGE
            )
        else:
            custom.patch_cluster_custom_object_status(
                *_cluster(kind), name, body, _content_type=_MERGE
            )
    except ApiException as exc:
        if exc.status != 404:  # deleted meanwhile: nothing to report on
            raise


def _scale_down(api: ApiClient, namespace: str, name: str, replicas: int) -> None:
    kind = KINDS["Deployment"]
    found = _get_custom(api, kind, namespace, name)
    if found is None or int(found.get("spec", {}).get("replicas") or 0) <= replicas:
        return
    patch = {"spec": {"replicas": replicas}}
    CustomObjectsApi(api).patch_namespaced_custom_object(
        *_in(kind, namespace), name, patch, _content_type=_MERGE
    )


def _group_objects(api: ApiClient, namespace: str, group: str) -> list[tuple[str, str, int]]:
    custom, core = CustomObjectsApi(api), CoreV1Api(api)
    sets: dict[str, Any] = custom.list_namespaced_custom_object(  # type: ignore[assignment]
        "apps", "v1", namespace, "statefulsets", label_selector=_GROUP_OBJECTS
    )
    services = api.sanitize_for_serialization(  # type: ignore[no-untyped-call]
        core.list_namespaced_service(namespace, label_selector=_GROUP_OBJECTS)
    )
    listed = [("StatefulSet", sets.get("items", ())), ("Service", services["items"])]
    listed += [
        (key, _list_served(api, KINDS[key], namespace, _GROUP_OBJECTS))
        for key in GANG_KEYS.values()
    ]
    found = []
    for kind, items in listed:
        for item in items:
            labels = item["metadata"].get("labels") or {}
            if _ours(item) and labels[GROUP_LABEL] == group:
                found.append((kind, str(item["metadata"]["name"]), int(labels[INSTANCE_LABEL])))
    return found


def _list_served(
    api: ApiClient, kind: Kind, namespace: str | None, selector: str | None = None
) -> list[dict[str, Any]]:
    """`_list`, or nothing where the API server does not serve the kind (a gang scheduler's
    PodGroup on a cluster without that scheduler) or the operator may not list it (a kind its
    groups do not use, left out of a narrowed Role)."""
    try:
        return _list(api, kind, namespace, selector)
    except ApiException as exc:
        if exc.status not in (403, 404) or kind not in _GANG_KINDS:
            raise
        return []


def _kueue_workloads(api: ApiClient, namespace: Scope) -> KueueWorkloads:
    try:
        items = _list(api, KINDS["Workload"], namespace)
    except ApiException as exc:
        if exc.status == 404:
            return KueueWorkloads(items=None, served=False)
        return KueueWorkloads(items=None, served=True, unreadable=f"{exc.status} {exc.reason}")
    found = {(str(i["metadata"]["namespace"]), str(i["metadata"]["name"])): i for i in items}
    return KueueWorkloads(items=found, served=True)


def _gang_states(
    api: ApiClient, namespace: Scope, schedulers: Iterable[GangScheduler]
) -> GangStates:
    served: set[GangScheduler] = set()
    unplaced = {}
    for scheduler in schedulers:
        try:
            items = _list(api, KINDS[GANG_KEYS[scheduler]], namespace, _GROUP_OBJECTS)
        except ApiException as exc:
            if exc.status == 404:
                continue
            # Forbidden, or the scheduler's API failing: what it says is unknown this pass,
            # which is no reason to stop admitting everyone else.
            _log.warning(
                "gang scheduler's PodGroups not read",
                extra={"scheduler": scheduler, "status": exc.status, "error": exc.reason},
            )
            items = []
        served.add(scheduler)
        for item in items:
            if not _ours(item) or _is_leaving(item):
                continue
            if not str(item["metadata"]["labels"][INSTANCE_LABEL]).isdigit():
                continue  # not one the operator made
            reason = unplaced_reason(scheduler, item)
            if reason is not None:
                meta, labels = item["metadata"], item["metadata"]["labels"]
                key = (str(meta["namespace"]), str(labels[GROUP_LABEL]))
                unplaced[(*key, int(labels[INSTANCE_LABEL]))] = reason
    return GangStates(served=served, unplaced=unplaced)


def _delete_objects(api: ApiClient, namespace: str, objects: Iterable[tuple[str, str]]) -> None:
    for kind, name in objects:
        try:
            if kind == "Service":
                CoreV1Api(api).delete_namespaced_service(name, namespace)
            else:
                CustomObjectsApi(api).delete_namespaced_custom_object(
                    *_in(KINDS[kind], namespace), name
                )
        except ApiException as exc:
            # Gone already; or a gang kind the cluster lacks, or the operator may not touch
            # (a group deletes every scheduler's PodGroup of its instance: it may have changed).
            if exc.status != 404 and not (exc.status == 403 and kind in GANG_KEYS.values()):
                raise


def _post_event(
    api: ApiClient, body: Mapping[str, Any], warning: bool, reason: str, message: str
) -> None:
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


def _namespace_labels(api: ApiClient, name: str) -> dict[str, str]:
    found = _get(CoreV1Api(api).read_namespace, name)
    if found is None or found.metadata is None:
        return {}
    return dict(found.metadata.labels or {})
