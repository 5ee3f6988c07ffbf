"""The controller's tests' view of the stand-in cluster: CR builders, a namespace's objects
through the official client, and waits on what the operator makes (bounded, never a sleep).
Shared by the controller tests; their fixtures are in conftest.py."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Callable
from typing import Any

import kopf
import pytest
from asya_operator.api.template import GROUP, VERSION
from asya_operator.config import load_operator_config
from asya_operator.operator import build
from kubernetes.client import CoreV1Api, CustomObjectsApi

from asya.errors import UnknownActorError
from asya.transport.rabbitmq import RabbitMQTransport
from tests.operator.emulator import Cluster


def operator_registry(namespace: str | None = None) -> kopf.OperatorRegistry:
    """The real operator's handlers, built as `asya-operator run` builds them, with the
    config the test's environment sets (`ASYA_OPERATOR_*`): for every namespace, or
    `namespace` only (`--namespace`)."""
    namespaces = () if namespace is None else (namespace,)
    return build(load_operator_config(os.environ), namespaces=namespaces).registry


ACTORS = f"{GROUP}/{VERSION}/asyncactors"
GROUPS = f"{GROUP}/{VERSION}/actorgroups"
DEPLOYMENTS = "apps/v1/deployments"
STATEFULSETS = "apps/v1/statefulsets"
SERVICES = "v1/services"
SCALED_OBJECTS = "keda.sh/v1alpha1/scaledobjects"
TRIGGER_AUTHS = "keda.sh/v1alpha1/triggerauthentications"
WAIT_S = 10.0
SIDECAR_IMAGE = "registry.example/asya-sidecar:test"


def async_actor(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AsyncActor",
        "metadata": {"name": name},
        "spec": {"image": "ghcr.io/acme/text:1", "handler": "text:normalize", **spec},
    }


class World:
    """The test's namespace through the official client, off the event loop."""

    def __init__(self, cluster: Cluster, kube, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self._custom = CustomObjectsApi(kube)
        self._core = CoreV1Api(kube)

    async def create_actor(self, body: dict[str, Any]) -> Any:
        return await asyncio.to_thread(
            self._custom.create_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            "asyncactors",
            body,
        )

    async def patch_actor(self, name: str, patch: dict[str, Any]) -> Any:
        return await asyncio.to_thread(
            self._custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            "asyncactors",
            name,
            patch,
            _content_type="application/merge-patch+json",
        )

    async def delete_actor(self, name: str) -> Any:
        return await asyncio.to_thread(
            self._custom.delete_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            "asyncactors",
            name,
        )

    async def create_group(self, body: dict[str, Any]) -> Any:
        return await asyncio.to_thread(
            self._custom.create_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            "actorgroups",
            body,
        )

    async def patch_group(self, name: str, patch: dict[str, Any]) -> Any:
        return await asyncio.to_thread(
            self._custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            "actorgroups",
            name,
            patch,
            _content_type="application/merge-patch+json",
        )

    async def delete_group(self, name: str) -> Any:
        return await asyncio.to_thread(
            self._custom.delete_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            "actorgroups",
            name,
        )

    async def events(self) -> list[dict[str, Any]]:
        """The namespace's Kubernetes Events, oldest first."""
        listed = await asyncio.to_thread(self._core.list_namespaced_event, self.namespace)
        return [e.to_dict() for e in listed.items]

    async def create_secret(self, name: str, data: dict[str, str]) -> Any:
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        body = {"metadata": {"name": name}, "data": encoded}
        return await asyncio.to_thread(self._core.create_namespaced_secret, self.namespace, body)

    async def patch_secret(self, name: str, data: dict[str, str | None]) -> Any:
        """Set the Secret's keys in `data` (None: remove that key)."""
        encoded = {
            k: None if v is None else base64.b64encode(v.encode()).decode() for k, v in data.items()
        }
        body = {"data": encoded}
        return await asyncio.to_thread(
            self._core.patch_namespaced_secret, name, self.namespace, body
        )

    async def delete_secret(self, name: str) -> Any:
        return await asyncio.to_thread(self._core.delete_namespaced_secret, name, self.namespace)

    async def wait_for_watch(self, resource: str) -> None:
        try:
            async with asyncio.timeout(WAIT_S):
                await self.cluster.watched(resource)
        except TimeoutError:
            pytest.fail(f"not within {WAIT_S} s: a watch of {resource}")

    async def get(self, resource: str, name: str) -> dict[str, Any] | None:
        """The object now (None: absent), as the stand-in holds it."""
        return await self.cluster.wait_for(resource, self.namespace, name, lambda _: True)

    async def wait_for(
        self,
        resource: str,
        name: str,
        condition: Callable[[dict[str, Any] | None], bool],
        what: str,
    ) -> Any:
        try:
            async with asyncio.timeout(WAIT_S):
                return await self.cluster.wait_for(resource, self.namespace, name, condition)
        except TimeoutError:
            now = self.cluster.current(resource, self.namespace, name)
            shown = "absent" if now is None else json.dumps(now.get("status"), sort_keys=True)
            pytest.fail(f"not within {WAIT_S} s: {what}; its status now: {shown}")

    async def wait_exists(self, resource: str, name: str) -> dict[str, Any]:
        found = await self.wait_for(resource, name, lambda o: o is not None, f"{resource} {name}")
        assert found is not None
        return found

    async def wait_condition(self, name: str, kind: str, status: str) -> dict[str, Any]:
        found = await self.wait_for(
            ACTORS,
            name,
            lambda o: o is not None and condition_of(o, kind).get("status") == status,
            f"AsyncActor {name} {kind}={status}",
        )
        assert found is not None
        return found


def condition_of(actor: dict[str, Any], kind: str) -> dict[str, Any]:
    for condition in (actor.get("status") or {}).get("conditions") or ():
        if condition["type"] == kind:
            return dict(condition)
    return {}


def observed(actor: dict[str, Any] | None) -> int | None:
    return None if actor is None else (actor.get("status") or {}).get("observedGeneration")


def container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name
    ]
    return dict(found)


def env_of(container_body: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container_body["env"]}


async def has_queue(broker: RabbitMQTransport, actor: str) -> bool:
    try:
        await broker.depth(actor)
    except UnknownActorError:
        return False
    return True
