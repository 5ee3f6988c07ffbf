"""Each namespace's broker identity, made by the operator when the platform gives it an
administrator's credentials (`OperatorConfig.broker_admin_secret`), and removed with the
namespace's last actor.

- **ensure** (before an actor or group is applied): a namespace whose actor uses the default
  broker Secret (`asya-broker`) and has none gets its identity on the broker (`asya.broker_admin`:
  vhost `asya.{ns}`, a user for its actors, one for KEDA, each with a generated password) and
  then the Secret, labelled as the operator's. A Secret the operator made is made again on the
  broker with its own passwords once per namespace and process (a broker that lost them gets
  them back at the operator's start); later reconciles read the Secret once. A Secret the
  platform made, or one an actor names other than the default, is never touched.
- **rotate** (the operator's Secret annotated `asya.sh/rotate` with a new value): new passwords
  on the broker (connections already open keep working; new ones need the new password), then
  the Secret's URLs, then the pods that read the Secret rolled (the caller's part:
  `handlers.identities`), then the Secret marked `asya.sh/rotated` with the value asked for.
- **release** (after an actor's or group's queues are released): when no AsyncActor or
  ActorGroup of the namespace is left and its Secret is the operator's, the two users go, the
  vhost too if no queue there holds a message (results and failures stay readable by an
  administrator otherwise), and then the Secret.

One namespace at a time (a lock per namespace): two actors created together make one identity.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, Protocol

from asya import broker_admin, broker_identity
from asya.errors import TransportError
from asya.transport.rabbitmq_counts import messages_ready
from asya_operator.api.metadata import MANAGED_BY
from asya_operator.api.template import (
    BROKER_AMQP_URL_KEY,
    BROKER_MANAGEMENT_URL_KEY,
    DEFAULT_BROKER_SECRET,
)
from asya_operator.config import OperatorConfig

_log = logging.getLogger(__name__)

ROTATE_ANNOTATION: Final = "asya.sh/rotate"
"""Set by whoever wants a namespace's broker passwords changed, to a new value each time."""
ROTATED_ANNOTATION: Final = "asya.sh/rotated"
"""Set by the operator to the `ROTATE_ANNOTATION` value it last carried out."""

IDENTITY_LABELS: Final = {
    "app.kubernetes.io/managed-by": MANAGED_BY,
    "app.kubernetes.io/component": "broker-identity",
}
"""On a broker Secret the operator made: it is the operator's to make again and to remove."""


class Owners(Protocol):
    @property
    def staying(self) -> object: ...


class Cluster(Protocol):
    """What this needs of the cluster client (`kube.Kube`): Secrets, and who is left."""

    async def read_secret(self, namespace: str, name: str) -> dict[str, str] | None: ...

    async def read_secret_parts(
        self, namespace: str, name: str
    ) -> tuple[dict[str, str], dict[str, str], dict[str, str]] | None: ...

    async def create_secret(
        self, namespace: str, name: str, labels: Mapping[str, str], data: Mapping[str, str]
    ) -> bool: ...

    async def patch_secret(
        self,
        namespace: str,
        name: str,
        data: Mapping[str, str],
        annotations: Mapping[str, str],
    ) -> None: ...

    async def delete_secret(self, namespace: str, name: str) -> None: ...

    async def name_owners(self, namespace: str) -> Owners: ...


class Identities:
    """Makes and removes namespaces' broker identities (see the module docstring)."""

    def __init__(self, kube: Cluster, config: OperatorConfig) -> None:
        self._kube = kube
        self._admin_secret = config.broker_admin_secret
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # Namespaces whose identity this process has made or made again: their next actors'
        # reconciles read the Secret once, not six calls to the broker each.
        self._made: set[str] = set()

    @property
    def enabled(self) -> bool:
        return bool(self._admin_secret)

    def _lock(self, namespace: str) -> asyncio.Lock:
        lock = self._locks.get(namespace)
        if lock is None:
            lock = self._locks[namespace] = asyncio.Lock()
        return lock

    async def ensure(self, namespace: str, secret_name: str) -> None:
        """Make `namespace`'s identity and Secret if it is the operator's to make.

        Raises:
            TransportError: the administrator's Secret is missing or incomplete, or the broker
                refused or could not be reached (the actor is reported Degraded with it).
        """
        if not self.enabled or secret_name != DEFAULT_BROKER_SECRET:
            return
        async with self._lock(namespace):
            found = await self._kube.read_secret_parts(namespace, DEFAULT_BROKER_SECRET)
            if found is not None and not _is_ours(found[0]):
                return  # the platform's own Secret
            if found is not None and namespace in self._made:
                return
            self._made.discard(namespace)
            admin_amqp, admin_management = await self._admin_urls()
            if found is not None:
                data = found[2]
                password, keda_password = broker_identity.passwords_of(
                    data.get(BROKER_AMQP_URL_KEY, ""), data.get(BROKER_MANAGEMENT_URL_KEY, "")
                )
                if password and keda_password:
                    await broker_admin.provision(
                        admin_management, namespace, password, keda_password
                    )
                    self._made.add(namespace)
                    return
            password, keda_password = secrets.token_hex(24), secrets.token_hex(24)
            await broker_admin.provision(admin_management, namespace, password, keda_password)
            amqp_url, management_url = broker_identity.identity_urls(
                admin_amqp, admin_management, namespace, password, keda_password
            )
            data = {BROKER_AMQP_URL_KEY: amqp_url, BROKER_MANAGEMENT_URL_KEY: management_url}
            if found is not None:  # ours, but unreadable: made anew
                await self._kube.delete_secret(namespace, DEFAULT_BROKER_SECRET)
            made = await self._kube.create_secret(
                namespace, DEFAULT_BROKER_SECRET, IDENTITY_LABELS, data
            )
            if made:
                self._made.add(namespace)
                _log.info("broker identity made", extra={"namespace": namespace})

    async def rotate(
        self,
        namespace: str,
        annotations: Mapping[str, str],
        roll: Callable[[str], Awaitable[None]],
    ) -> str | None:
        """Change `namespace`'s passwords if its Secret (the operator's, with these
        `annotations`) asks for it and they were not changed for that request yet: new
        passwords on the broker and in the Secret, then `roll(value)` (the caller rolls the
        pods that read the Secret), then the Secret marked done. All of it under the
        namespace's lock. The request's value when it was done, else None.

        Raises:
            TransportError: the administrator's Secret is missing, or the broker refused (the
                Secret is not marked: annotating again, or the operator's next start, retries).
        """
        wanted = annotations.get(ROTATE_ANNOTATION)
        if not self.enabled or not wanted or annotations.get(ROTATED_ANNOTATION) == wanted:
            return None
        async with self._lock(namespace):
            # As stored now, not as the event that woke the caller had it: the events of this
            # rotation's own writes come after it is done, and must not start it again.
            found = await self._kube.read_secret_parts(namespace, DEFAULT_BROKER_SECRET)
            if found is None or not _is_ours(found[0]):
                return None
            if found[1].get(ROTATED_ANNOTATION) == wanted:
                return None
            admin_amqp, admin_management = await self._admin_urls()
            password, keda_password = secrets.token_hex(24), secrets.token_hex(24)
            await broker_admin.provision(admin_management, namespace, password, keda_password)
            amqp_url, management_url = broker_identity.identity_urls(
                admin_amqp, admin_management, namespace, password, keda_password
            )
            data = {BROKER_AMQP_URL_KEY: amqp_url, BROKER_MANAGEMENT_URL_KEY: management_url}
            await self._kube.patch_secret(namespace, DEFAULT_BROKER_SECRET, data, {})
            self._made.add(namespace)
            await roll(wanted)
            # Marked last: an operator stopped before this rotates again at its start, rather
            # than leave pods with passwords that no longer open a connection.
            await self._kube.patch_secret(
                namespace, DEFAULT_BROKER_SECRET, {}, {ROTATED_ANNOTATION: wanted}
            )
            _log.info("broker credentials rotated", extra={"namespace": namespace})
            return wanted

    async def release(self, namespace: str) -> None:
        """Remove `namespace`'s identity and Secret if no actor or group is left there and the
        Secret is the operator's. A broker that refuses is logged: the actor's deletion is
        never held for it.
        """
        if not self.enabled:
            return
        async with self._lock(namespace):
            if (await self._kube.name_owners(namespace)).staying:
                return
            found = await self._kube.read_secret_parts(namespace, DEFAULT_BROKER_SECRET)
            if found is None or not _is_ours(found[0]):
                return
            try:
                admin_amqp, admin_management = await self._admin_urls()
                at = broker_identity.on_vhost(admin_amqp, broker_identity.vhost(namespace))
                vhost_gone = await broker_admin.remove(
                    admin_management, namespace, ready=lambda names: messages_ready(at, names)
                )
            except TransportError as exc:
                _log.warning(
                    "broker identity not removed",
                    extra={"namespace": namespace, "error": str(exc)},
                )
                return
            await self._kube.delete_secret(namespace, DEFAULT_BROKER_SECRET)
            self._made.discard(namespace)
            _log.info(
                "broker identity removed",
                extra={"namespace": namespace, "vhost_removed": vhost_gone},
            )

    async def _admin_urls(self) -> tuple[str, str]:
        """The administrator's AMQP and management URLs.

        Raises:
            TransportError: the Secret or one of its keys is missing.
        """
        where, _, name = self._admin_secret.rpartition("/")
        data = await self._kube.read_secret(where, name)
        keys = (BROKER_AMQP_URL_KEY, BROKER_MANAGEMENT_URL_KEY)
        if data is None or any(not data.get(key) for key in keys):
            raise TransportError(
                f"the broker administrator's Secret {self._admin_secret} is missing or lacks"
                f" {' or '.join(keys)}: the operator cannot make namespace identities without it"
            )
        return data[BROKER_AMQP_URL_KEY], data[BROKER_MANAGEMENT_URL_KEY]


def _is_ours(labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in IDENTITY_LABELS.items())
