"""A test-only KEDA: scales each ScaledObject's target on its RabbitMQ queue depth.

Test-only: part of the cluster stand-in, never shipped. Each `pollingInterval`, for
each ScaledObject in the emulator with a `rabbitmq` trigger (`protocol: http`, `mode:
QueueLength`), it does what KEDA's rabbitmq scaler does:
- **where**: the trigger's `authenticationRef` names a TriggerAuthentication whose
  `secretTargetRef` parameter `host` is a key of a Secret (`data`, base64): the operator's
  plan points it at the broker Secret's `management-url`, e.g.
  `http://guest:guest@127.0.0.1:15672/`. The URL's user and password are the basic-auth
  credentials, its path the vhost (empty or `/` = the default vhost `/`).
- **depth**: `GET <scheme>://<host>/api/queues/<vhost>/<queueName>` and its `messages`, which
  RabbitMQ counts as ready plus unacked (KEDA's `protocol: http`; with `amqp` only ready ones
  count). The management API refreshes these counts every `collect_statistics_interval` (5 s
  by default), so the depth it reports lags the queue by up to that much, as KEDA's does. A
  queue the API does not know leaves the replicas as they are (KEDA reports an error).
- **replicas**: `asya.local.autoscale.next_scale`, KEDA's rule (activation, `ceil(depth /
  value)` within `[minReplicaCount, maxReplicaCount]`, `cooldownPeriod` before going back to
  the minimum), on the clock given (`time.monotonic` by default).
- **scale**: a merge patch of the target's field the CRD's scale subresource names
  (`specReplicasPath`: `.spec.replicas` for AsyncActor), since the emulator has no `/scale`
  subresource; `apps/v1` Deployments are patched at `.spec.replicas` likewise.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import aiohttp
from asya_operator.api.crds import all_crds

from asya.actor import ActorOptions
from asya.local.autoscale import ScaleState, next_scale

_log = logging.getLogger(__name__)

KEDA_PATH = "/apis/keda.sh/v1alpha1"


def _scale_targets() -> dict[tuple[str, str], tuple[str, str]]:
    """(apiVersion, kind) -> (collection path under /apis, specReplicasPath)."""
    targets = {("apps/v1", "Deployment"): ("apps/v1/deployments", ".spec.replicas")}
    for crd in all_crds():
        spec = crd["spec"]
        for version in spec["versions"]:
            scale = version.get("subresources", {}).get("scale")
            if scale is not None:
                api_version = f"{spec['group']}/{version['name']}"
                collection = f"{api_version}/{spec['names']['plural']}"
                targets[api_version, spec["names"]["kind"]] = (
                    collection,
                    scale["specReplicasPath"],
                )
    return targets


class Keda:
    """Polls the emulator's ScaledObjects and scales their targets; an async context manager."""

    def __init__(
        self,
        server: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float = 0.2,
    ) -> None:
        """`server`: the emulator's URL. Every `tick_s` the ScaledObjects due are polled."""
        self._server = server.rstrip("/")
        self._clock = clock
        self._tick_s = tick_s
        self._targets = _scale_targets()
        self._states: dict[tuple[str, str], ScaleState] = {}
        self._due: dict[tuple[str, str], float] = {}
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self.depths: list[tuple[str, int]] = []
        """Every depth read, as (queue, messages): what the test can print when it fails."""

    async def __aenter__(self) -> Keda:
        self._session = aiohttp.ClientSession()
        self._task = asyncio.create_task(self._loop(), name="keda stand-in")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        assert self._session is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._session.close()

    async def _loop(self) -> None:
        while True:
            listing = await self._request("GET", f"{KEDA_PATH}/scaledobjects")
            for scaled in listing["items"]:
                meta = scaled["metadata"]
                key = (meta["namespace"], meta["name"])
                now = self._clock()
                if now >= self._due.get(key, now):
                    self._due[key] = now + float(scaled["spec"].get("pollingInterval", 30))
                    await self._poll(scaled, now)
            await asyncio.sleep(self._tick_s)

    async def _poll(self, scaled: dict[str, Any], now: float) -> None:
        namespace = scaled["metadata"]["namespace"]
        spec = scaled["spec"]
        (trigger,) = spec["triggers"]
        settings = trigger["metadata"]
        if trigger["type"] != "rabbitmq" or settings.get("protocol") != "http":
            raise NotImplementedError(f"trigger {trigger}: only rabbitmq over http is stood in")
        host = await self._host(namespace, trigger["authenticationRef"]["name"])
        depth = await self._depth(host, settings["queueName"])
        if depth is None:
            return
        self.depths.append((settings["queueName"], depth))
        scaling = ActorOptions(
            min_replicas=int(spec.get("minReplicaCount", 0)),
            max_replicas=int(spec.get("maxReplicaCount", 100)),
            queue_length=int(settings["value"]),
            activation=int(settings.get("activationValue", 0)),
            cooldown_s=float(spec.get("cooldownPeriod", 300)),
        ).scaling
        target = spec["scaleTargetRef"]
        collection, replicas_path = self._targets[target["apiVersion"], target["kind"]]
        base, plural = collection.rsplit("/", 1)
        url = f"/apis/{base}/namespaces/{namespace}/{plural}/{target['name']}"
        key = (namespace, scaled["metadata"]["name"])
        if key not in self._states:
            current = _at_path(await self._request("GET", url), replicas_path)
            self._states[key] = ScaleState(scaling.min_replicas if current is None else current)
        before = self._states[key].replicas
        self._states[key] = state = next_scale(scaling, self._states[key], depth, now)
        if state.replicas != before:
            _log.info("scaling", extra={"target": target["name"], "replicas": state.replicas})
            await self._request("PATCH", url, _patch_at(replicas_path, state.replicas))

    async def _host(self, namespace: str, auth_name: str) -> str:
        auth = await self._request(
            "GET", f"{KEDA_PATH}/namespaces/{namespace}/triggerauthentications/{auth_name}"
        )
        (ref,) = [r for r in auth["spec"]["secretTargetRef"] if r["parameter"] == "host"]
        secret = await self._request("GET", f"/api/v1/namespaces/{namespace}/secrets/{ref['name']}")
        return base64.b64decode(secret["data"][ref["key"]]).decode()

    async def _depth(self, host: str, queue: str) -> int | None:
        assert self._session is not None
        url = urllib.parse.urlsplit(host)
        vhost = url.path[1:] or "/"
        api = (
            f"{url.scheme}://{url.hostname}:{url.port}/api/queues/"
            f"{urllib.parse.quote(vhost, safe='')}/{urllib.parse.quote(queue, safe='')}"
        )
        auth = aiohttp.encode_basic_auth(
            urllib.parse.unquote(url.username or ""), urllib.parse.unquote(url.password or "")
        )
        async with self._session.get(api, headers={"Authorization": auth}) as response:
            if response.status == 404:
                _log.warning("queue not found", extra={"queue": queue})
                return None
            if response.status in (401, 403):
                # As KEDA does with a scaler error: this poll reads nothing, the next tries
                # again (a password rotated between reading the Secret and using it).
                _log.warning("credentials refused", extra={"queue": queue})
                return None
            response.raise_for_status()
            info = await response.json()
        # A queue the stats collector has not reported on yet has no `messages`: 0 it is.
        return int(info.get("messages", 0))

    async def _request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        assert self._session is not None
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        async with self._session.request(
            method, f"{self._server}{path}", json=body, headers=headers
        ) as response:
            response.raise_for_status()
            found: dict[str, Any] = await response.json()
            return found


def _at_path(body: dict[str, Any], path: str) -> int | None:
    value: Any = body
    for part in path.strip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return None if value is None else int(value)


def _patch_at(path: str, replicas: int) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    level = patch
    *parents, leaf = path.strip(".").split(".")
    for part in parents:
        level = level.setdefault(part, {})
    level[leaf] = replicas
    return patch
