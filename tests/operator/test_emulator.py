"""The stand-in cluster: a canary of the API semantics asya's operator relies on, and kopf on it.

The canary fails when a kmock upgrade (or a change to `emulator.Cluster`) changes what the
operator's tests assume of the API server. The kopf tests use a toy handler set on a registry
of their own, not the operator's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import kopf
import kubernetes
import pytest
from asya_operator.api.template import GROUP, VERSION
from kubernetes.client import ApiException, CoreV1Api, CustomObjectsApi

from tests.operator.emulator import Cluster

PLURAL = "asyncactors"
RESOURCE = f"{GROUP}/{VERSION}/{PLURAL}"
NAMESPACE = "team-a"
WAIT_S = 5.0


def async_actor(name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AsyncActor",
        "metadata": {"name": name, **metadata},
        "spec": {"image": "ghcr.io/acme/text:1", "handler": "text:normalize"},
    }


class Actors:
    """AsyncActors in one namespace through the official client, off the event loop."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        self._api = CustomObjectsApi(api)

    async def create(self, body: dict[str, Any]) -> Any:
        return await asyncio.to_thread(
            self._api.create_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL, body
        )

    async def get(self, name: str) -> Any:
        return await asyncio.to_thread(
            self._api.get_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL, name
        )

    async def list_all(self) -> Any:
        return await asyncio.to_thread(
            self._api.list_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL
        )

    async def patch(self, name: str, body: Any) -> Any:
        return await asyncio.to_thread(
            self._api.patch_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL, name, body
        )

    async def delete(self, name: str) -> Any:
        return await asyncio.to_thread(
            self._api.delete_namespaced_custom_object, GROUP, VERSION, NAMESPACE, PLURAL, name
        )

    async def is_gone(self, name: str) -> bool:
        try:
            await self.get(name)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    async def watch_from(self, resource_version: str, count: int) -> list[tuple[str, str]]:
        """The first `count` events of a WATCH from `resource_version`: (type, name) each."""

        def read() -> list[tuple[str, str]]:
            watch = kubernetes.watch.Watch()
            events = []
            for event in watch.stream(
                self._api.list_namespaced_custom_object,
                GROUP,
                VERSION,
                NAMESPACE,
                PLURAL,
                resource_version=resource_version,
                _request_timeout=WAIT_S,  # the stand-in ignores timeoutSeconds
            ):
                events.append((event["type"], event["object"]["metadata"]["name"]))
                if len(events) == count:
                    watch.stop()
            return events

        return await asyncio.to_thread(read)


@pytest.fixture
def actors(kube) -> Actors:
    return Actors(kube)


async def wait_for(
    cluster: Cluster, name: str, condition: Callable[[dict[str, Any] | None], bool], what: str
) -> None:
    """Wait until the AsyncActor `name` meets `condition` (None: gone); fail after WAIT_S."""
    try:
        async with asyncio.timeout(WAIT_S):
            await cluster.wait_for(RESOURCE, NAMESPACE, name, condition)
    except TimeoutError:
        pytest.fail(f"not within {WAIT_S} s: {what}")


# The canary: the API semantics the operator's tests assume.


async def test_create_stamps_what_the_api_server_owns(actors):
    body = async_actor("text")
    del body["apiVersion"], body["kind"]

    created = await actors.create(body)

    assert created["apiVersion"] == "asya.sh/v1alpha1"
    assert created["kind"] == "AsyncActor"
    meta = created["metadata"]
    assert meta["namespace"] == NAMESPACE
    assert meta["generation"] == 1
    assert meta["uid"]
    assert meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) > 0


async def test_every_write_gets_a_newer_resource_version(actors):
    first = await actors.create(async_actor("text"))

    patched = await actors.patch("text", {"metadata": {"labels": {"tier": "gold"}}})

    assert int(patched["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


async def test_json_patch_with_a_stale_resource_version_test_is_rejected_with_422(actors):
    created = await actors.create(async_actor("text"))
    await actors.patch("text", {"metadata": {"labels": {"tier": "gold"}}})
    stale = created["metadata"]["resourceVersion"]

    with pytest.raises(ApiException) as caught:
        await actors.patch(
            "text",
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": stale},
                {"op": "add", "path": "/metadata/finalizers", "value": ["asya.sh/test"]},
            ],
        )

    assert caught.value.status == 422
    assert "finalizers" not in (await actors.get("text"))["metadata"]


async def test_merge_patch_with_a_stale_resource_version_is_a_conflict(actors):
    created = await actors.create(async_actor("text"))
    await actors.patch("text", {"metadata": {"labels": {"tier": "gold"}}})
    stale = created["metadata"]["resourceVersion"]

    with pytest.raises(ApiException) as caught:
        await actors.patch("text", {"metadata": {"resourceVersion": stale, "labels": None}})

    assert caught.value.status == 409
    assert (await actors.get("text"))["metadata"]["labels"] == {"tier": "gold"}


async def test_list_returns_the_current_resource_version(actors):
    await actors.create(async_actor("first"))
    second = await actors.create(async_actor("second"))

    listing = await actors.list_all()

    assert listing["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]
    assert [item["metadata"]["name"] for item in listing["items"]] == ["first", "second"]


async def test_watch_from_a_resource_version_skips_objects_not_newer(actors):
    first = await actors.create(async_actor("first"))
    await actors.create(async_actor("second"))

    events = await actors.watch_from(first["metadata"]["resourceVersion"], count=1)

    assert events == [("ADDED", "second")]


async def test_delete_with_finalizers_marks_and_removing_them_deletes(actors):
    await actors.create(async_actor("text", finalizers=["asya.sh/test"]))

    await actors.delete("text")
    marked = await actors.get("text")
    await actors.patch("text", {"metadata": {"finalizers": []}})

    assert marked["metadata"]["deletionTimestamp"]
    assert await actors.is_gone("text")


async def test_namespaces_are_a_cluster_scoped_kind_to_read_patch_list_and_watch(kube):
    core = CoreV1Api(kube)
    body = {"metadata": {"name": "ml-a", "labels": {"team": "a"}}}
    created = await asyncio.to_thread(core.create_namespace, body)
    since = created.metadata.resource_version

    await asyncio.to_thread(
        core.patch_namespace, "ml-a", {"metadata": {"labels": {"asya.sh/default-pool": "p"}}}
    )

    found = await asyncio.to_thread(core.read_namespace, "ml-a")
    assert found.metadata.labels == {"team": "a", "asya.sh/default-pool": "p"}
    assert found.metadata.namespace is None
    listed = await asyncio.to_thread(core.list_namespace)
    assert [n.metadata.name for n in listed.items] == ["ml-a"]
    assert listed.metadata.resource_version == found.metadata.resource_version

    def watch_one() -> tuple[str, dict[str, str]]:
        stream = kubernetes.watch.Watch().stream(
            core.list_namespace, resource_version=since, _request_timeout=WAIT_S
        )
        event = next(iter(stream))
        return event["type"], event["object"].metadata.labels

    assert await asyncio.to_thread(watch_one) == ("ADDED", found.metadata.labels)


async def test_a_namespaced_kind_in_a_namespace_is_still_served_there(kube):
    core = CoreV1Api(kube)
    await asyncio.to_thread(core.create_namespace, {"metadata": {"name": NAMESPACE}})

    await asyncio.to_thread(
        core.create_namespaced_config_map, NAMESPACE, {"metadata": {"name": "settings"}}
    )

    found = await asyncio.to_thread(core.read_namespaced_config_map, "settings", NAMESPACE)
    assert found.metadata.namespace == NAMESPACE
    with pytest.raises(ApiException) as caught:
        await asyncio.to_thread(core.read_namespace, "settings")
    assert caught.value.status == 404


# kopf against the stand-in, with a toy handler set (not the operator's).


def toy_operator() -> tuple[kopf.OperatorRegistry, list[str]]:
    """Marks a created AsyncActor Ready; records deletions (its delete handler adds kopf's
    finalizer)."""
    registry = kopf.OperatorRegistry()
    deleted: list[str] = []

    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    def mark_ready(patch: kopf.Patch, **_: Any) -> None:
        patch.status["conditions"] = [{"type": "Ready", "status": "True", "reason": "Toy"}]

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)
    def record_deletion(name: str, **_: Any) -> None:
        deleted.append(name)

    return registry, deleted


def is_ready(body: dict[str, Any] | None) -> bool:
    conditions = (body or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def is_handled(body: dict[str, Any] | None) -> bool:
    """Ready, and holding kopf's finalizer (added because the toy has a delete handler)."""
    return is_ready(body) and bool((body or {}).get("metadata", {}).get("finalizers"))


def is_gone(body: dict[str, Any] | None) -> bool:
    return body is None


async def test_kopf_handles_a_created_actor_with_a_finalizer_and_a_status(
    cluster, actors, run_operator
):
    registry, _ = toy_operator()
    await run_operator(registry)
    async with asyncio.timeout(WAIT_S):
        await cluster.watched(RESOURCE)

    await actors.create(async_actor("text"))

    await wait_for(cluster, "text", is_handled, "the AsyncActor is Ready, with kopf's finalizer")
    assert is_handled(await actors.get("text"))


async def test_kopf_runs_the_delete_handler_and_releases_the_actor(cluster, actors, run_operator):
    registry, deleted = toy_operator()
    await run_operator(registry)
    await actors.create(async_actor("text"))
    await wait_for(cluster, "text", is_handled, "kopf handled the AsyncActor")

    await actors.delete("text")

    await wait_for(cluster, "text", is_gone, "the AsyncActor is deleted")
    assert deleted == ["text"]
    assert await actors.is_gone("text")


async def test_kopf_handles_an_actor_created_before_it_started(cluster, actors, run_operator):
    await actors.create(async_actor("early"))
    registry, _ = toy_operator()

    await run_operator(registry)

    await wait_for(cluster, "early", is_handled, "the AsyncActor made before kopf is handled")
