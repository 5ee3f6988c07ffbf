"""A Kubernetes API server stand-in for the operator's tests: kmock's emulator, made kopf-ready.

Test-only: this never ships and is no part of `asya_operator`. `kmock.KubernetesEmulator` is a
real HTTP server with an in-memory object store, but plain kmock 0.8 stalls kopf (no handler
ever runs). `Cluster` adds what kopf relies on, each point found necessary by removing it:

1. `metadata.resourceVersion` from one global counter on every write; a JSON patch whose `test`
   op fails answers 422 (kopf's finalizer patches start with one and retry on 422), a merge
   patch carrying a stale resourceVersion answers 409.
2. LIST returns the current resourceVersion, and WATCH skips objects not newer than
   `?resourceVersion=N` (kmock replays everything as ADDED: a CR created before kopf started
   would then be handled from a stale body and never again).
3. Create stamps `metadata.namespace` from the URL (kopf builds its PATCH URLs from it),
   `apiVersion`, `kind`, `uid`, `creationTimestamp`, `generation`.
4. A WATCH takes its snapshot and subscribes to the event bus in one step, so no event falls
   in between.
5. A request is forgotten once served: kmock matches each request by scanning all it has
   recorded, which makes a long test quadratic.
6. Namespaces are served as the cluster-scoped kind they are (get, list, watch, create, patch,
   delete). kmock reads `/api/v1/namespaces/N` as "namespace N" of no resource and fails on
   `/api/v1/namespaces`; such a request is parsed under another path and given back its
   resource, `v1/namespaces`.

For the tests' own checks, `after_write(resource, callback)` calls `callback` after every write
of a resource, in the same step as the write: it sees the store exactly as that write left it.

It reaches into kmock's internals (`_objects`, `_buses`, `_lock`), hence `kmock==0.8` pinned
and `test_emulator.py`'s canary of these semantics. Still missing, as in kmock: validation,
defaulting, server-side apply, strategic merge, `/status` isolation, selectors, garbage
collection, controllers; see the reference.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import datetime
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, cast

import aiohttp.web
import attrs
import jsonpatch
import kmock
from asya_operator.api.crds import all_crds
from kmock._internal import enums, k8s, rendering
from typing_extensions import override

_WRITES = frozenset({enums.action.CREATE, enums.action.UPDATE, enums.action.DELETE})
_CRD_VERBS = frozenset({"create", "delete", "get", "list", "patch", "update", "watch"})
_NAMESPACES = kmock.resource("v1/namespaces")
_NAMESPACE_PATH = re.compile(r"/api/v1/namespaces(?P<rest>(?:/[^/]+(?:/status|/finalize)?)?)")
# A plural kmock parses as a cluster-scoped resource's; requests for Namespaces travel under it.
_NAMESPACES_ALIAS = kmock.resource("v1/namespaces.stand-in")


@attrs.define(kw_only=True)
class Cluster(kmock.KubernetesEmulator):
    """kmock's emulator with resourceVersions, resumable watches and kopf-ready create/patch."""

    _last_version: int = attrs.field(default=0, init=False)
    # Writes one at a time: a write's check, kmock's store and its watch event are one step,
    # and LIST/WATCH never see the counter ahead of the store.
    _writing: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    _watched: collections.defaultdict[kmock.resource, asyncio.Event] = attrs.field(
        factory=lambda: collections.defaultdict(asyncio.Event), init=False
    )
    _after_write: collections.defaultdict[kmock.resource, list[Callable[[], None]]] = attrs.field(
        factory=lambda: collections.defaultdict(list), init=False
    )
    _refusals: collections.defaultdict[
        kmock.resource, list[Callable[[dict[str, Any]], str | None]]
    ] = attrs.field(factory=lambda: collections.defaultdict(list), init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.resources.load_bundled()
        for crd in all_crds():
            register_crd(self, crd)

    async def watched(self, resource: str) -> None:
        """Wait until some client watches `resource` (kopf: past its first LIST, so an object
        created now reaches it as a watch event)."""
        await self._watched[kmock.resource(resource)].wait()

    async def wait_for(
        self,
        resource: str,
        namespace: str | None,
        name: str,
        condition: Callable[[dict[str, Any] | None], bool],
    ) -> dict[str, Any] | None:
        """Wait until an object meets `condition` (given None while it does not exist), and
        return it. Event-driven, no polling; bound it with `asyncio.timeout`."""
        key = kmock.resource(resource)
        bus = self._buses[key]
        async with self._writing:
            mark = await bus.mark()
            current = self._body(key, namespace, name)
        try:
            async with _closing(bus.stream(since=mark)) as events:
                while not condition(current):
                    event = await anext(events)
                    meta = event["object"]["metadata"]
                    if (meta.get("namespace"), meta["name"]) == (namespace, name):
                        current = None if event["type"] == "DELETED" else event["object"]
        finally:
            await bus.unmark(mark)
        return current

    def current(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object as stored now (None: absent); for a condition that looks at others."""
        return self._body(kmock.resource(resource), namespace, name)

    def stored(self, resource: str) -> list[dict[str, Any]]:
        """Every object of `resource` as stored now, in every namespace."""
        key = kmock.resource(resource)
        return [
            obj.raw
            for (kind, _ns, _name), obj in self._objects.items()
            if kind == key and not obj.deleted
        ]

    def after_write(self, resource: str, callback: Callable[[], None]) -> None:
        """Call `callback` after each create, patch or delete of `resource`, before any other
        write (it may read the store through `current` and `stored`)."""
        self._after_write[kmock.resource(resource)].append(callback)

    def refuse(self, resource: str, check: Callable[[dict[str, Any]], str | None]) -> None:
        """Answer a create or patch of `resource` whose body `check` finds a problem in (its
        words) with 422 Invalid, as the API server refuses an invalid object (a field it does
        not know, under strict field validation)."""
        self._refusals[kmock.resource(resource)].append(check)

    def _next_version(self) -> str:
        self._last_version += 1
        return str(self._last_version)

    @override
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        found = _NAMESPACE_PATH.fullmatch(raw_request.path)
        if found is not None:
            path = f"/api/v1/{_NAMESPACES_ALIAS.plural}{found['rest']}"
            url = raw_request.rel_url.with_path(path).with_query(raw_request.rel_url.query)
            raw_request = raw_request.clone(rel_url=url)
        return await super().__call__(raw_request)

    @override
    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource == _NAMESPACES_ALIAS:
            # Recorded in its place: kmock finds a request's reaction among those it recorded,
            # by identity.
            served = attrs.evolve(request, resource=_NAMESPACES)
            self._requests[:] = [served if r is request else r for r in self._requests]
            request = served
        try:
            return await self._handle_kept(request)
        finally:
            # kmock finds each request's reaction by scanning every request it has recorded, so
            # a long test's later requests grow ever slower (seen: three quarters of a stand-in
            # test's CPU). No test reads that history: keep only the requests being served.
            self._requests[:] = [r for r in self._requests if r is not request]

    async def _handle_kept(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None or request.action not in _WRITES:
            return await super()._handle(request)
        async with self._writing:
            if request.action in (enums.action.CREATE, enums.action.UPDATE):
                for check in self._refusals.get(request.resource, ()):
                    problem = check(request.data) if isinstance(request.data, dict) else None
                    if problem is not None:
                        raise k8s.KubernetesError(status=422, reason="Invalid", message=problem)
            if request.action == enums.action.CREATE:
                self._stamp_created(request)
            elif request.action == enums.action.UPDATE:
                self._check_and_stamp_patch(request)
            elif request.action == enums.action.DELETE:
                await self._mark_deleting(request)
            response = await super()._handle(request)
            for callback in self._after_write.get(request.resource, ()):
                callback()
        if request.action == enums.action.CREATE and response.status == 200:
            # As a real server: the official client reads a create's body only from a 201.
            response.set_status(201)
        return response

    def _stamp_created(self, request: rendering.Request) -> None:
        assert request.resource is not None
        body = request.data
        meta = body.setdefault("metadata", {})
        if request.namespace is not None:
            meta["namespace"] = request.namespace
        resource = request.resource
        api_version = f"{resource.group}/{resource.version}" if resource.group else "v1"
        body.setdefault("apiVersion", api_version)
        if resource in self.resources and self.resources[resource].kind:
            body.setdefault("kind", self.resources[resource].kind)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        meta["resourceVersion"] = self._next_version()

    def _check_and_stamp_patch(self, request: rendering.Request) -> None:
        current = self._current(request)
        if current is None:
            return  # kmock answers 404
        patch = request.data
        if isinstance(patch, list):
            try:
                jsonpatch.apply_patch(copy.deepcopy(current), patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise k8s.KubernetesError(status=422, reason="Invalid", message=str(exc)) from exc
            patch.append(
                {"op": "add", "path": "/metadata/resourceVersion", "value": self._next_version()}
            )
        elif isinstance(patch, dict):
            meta = patch.get("metadata") or {}
            wanted = meta.get("resourceVersion")
            have = current["metadata"].get("resourceVersion")
            if wanted is not None and wanted != have:
                raise k8s.KubernetesError(
                    status=409,
                    reason="Conflict",
                    message=f"resourceVersion {wanted} is stale: the object is at {have}",
                )
            patch["metadata"] = {**meta, "resourceVersion": self._next_version()}

    async def _mark_deleting(self, request: rendering.Request) -> None:
        # kmock sets deletionTimestamp without a new version; do it here so watchers see a
        # newer object (kmock then finds it already marked and leaves it).
        current = self._current(request)
        meta = (current or {}).get("metadata", {})
        if current is None or meta.get("deletionTimestamp") or not meta.get("finalizers"):
            return
        assert request.resource is not None
        assert request.name is not None
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            stamp = {"deletionTimestamp": _now(), "resourceVersion": self._next_version()}
            self._objects[key].patch({"metadata": stamp})
            event = {"type": "MODIFIED", "object": self._objects[key].raw}
            await self._buses[request.resource].put(event)

    def _current(self, request: rendering.Request) -> dict[str, Any] | None:
        assert request.resource is not None
        assert request.name is not None
        return self._body(request.resource, request.namespace, request.name)

    def _body(
        self, resource: kmock.resource, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        key = (resource, namespace, name)
        if key not in self._objects or self._objects[key].deleted:
            return None
        raw: dict[str, Any] = self._objects[key].raw
        return raw

    @override
    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        async with self._writing:
            listing: dict[str, Any] = await super()._serve_list(request)  # type: ignore[assignment]
            listing["metadata"] = {"resourceVersion": str(self._last_version)}
        return listing

    @override
    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""  # send the headers now, as kmock does
        assert request.resource is not None
        since = int(request.params.get("resourceVersion") or 0)
        bus = self._buses[request.resource]
        async with self._writing:
            snapshot = [
                obj.raw
                for (resource, namespace, _), obj in self._objects.items()
                if resource == request.resource
                and _in_scope(request, namespace)
                and not obj.deleted
                and int(obj.raw.get("metadata", {}).get("resourceVersion") or 0) > since
            ]
            mark = await bus.mark()
        self._watched[request.resource].set()
        try:
            for raw in snapshot:
                yield {"type": "ADDED", "object": raw}
            async with _closing(bus.stream(since=mark)) as events:
                async for event in events:
                    namespace = event.get("object", {}).get("metadata", {}).get("namespace")
                    if _in_scope(request, namespace):
                        yield event
        finally:
            await bus.unmark(mark)


def register_crd(cluster: kmock.KubernetesEmulator, crd: dict[str, Any]) -> None:
    """Declare a CRD's resource in the cluster's discovery (kmock does not read CRD objects)."""
    spec = crd["spec"]
    names = spec["names"]
    for version in spec["versions"]:
        key = f"{spec['group']}/{version['name']}/{names['plural']}"
        cluster.resources[key] = kmock.ResourceInfo(
            kind=names["kind"],
            singular=names["singular"],
            namespaced=spec["scope"] == "Namespaced",
            verbs=set(_CRD_VERBS),
            shortnames=set(names.get("shortNames", ())),
            categories=set(names.get("categories", ())),
            subresources=set(version.get("subresources", {})),
        )


def _closing(
    stream: AsyncIterator[dict[str, Any]],
) -> contextlib.aclosing[AsyncGenerator[dict[str, Any], None]]:
    # Close a bus stream here, not in the garbage collector (its aclose() is a stray task).
    return contextlib.aclosing(cast(AsyncGenerator[dict[str, Any], None], stream))


def _in_scope(request: rendering.Request, namespace: str | None) -> bool:
    return request.namespace is None or namespace == request.namespace


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def kubeconfig_for(server: str) -> dict[str, object]:
    """A kubeconfig whose current context is the stand-in at `server` (no credentials)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stand-in", "cluster": {"server": server}}],
        "users": [{"name": "stand-in", "user": {}}],
        "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "stand-in"}}],
        "current-context": "stand-in",
    }
