"""kopf's handler for the broker Secrets the operator made: a rotation asked for.

`kubectl annotate secret asya-broker -n NS asya.sh/rotate=$(date +%s) --overwrite` on a Secret
the operator made (`identities.IDENTITY_LABELS`) gives the namespace new passwords
(`Identities.rotate`), then rolls every pod that reads the Secret so that it connects with
them: the operator's Deployments there (actors and end actors: one pod at a time as their
strategies say, each draining first, its in-flight work finished over the connection it
already has) and each ActorGroup's instances, restarted whole under the same admission (its
StatefulSets deleted, the next admission pass makes them anew). Then the Secret is marked
`asya.sh/rotated`. A rotation that fails is logged; annotating again tries again.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from asya.errors import TransportError
from asya_operator.api.group import ActorGroup
from asya_operator.api.template import DEFAULT_BROKER_SECRET
from asya_operator.identities import IDENTITY_LABELS, Identities
from asya_operator.kube import Kube
from asya_operator.reconcile.admission import AdmissionLoop

_log = logging.getLogger(__name__)


class IdentityHandlers:
    """The rotation handler, bound to what carries it out."""

    def __init__(self, identities: Identities, kube: Kube, admission: AdmissionLoop) -> None:
        self._identities = identities
        self._kube = kube
        self._admission = admission

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """Put the handler on `registry` (only with a broker administrator configured)."""
        if not self._identities.enabled:
            return
        kopf.on.event(
            "v1", "secrets", labels=IDENTITY_LABELS, registry=registry, id="rotate_credentials"
        )(self.rotate)

    async def rotate(
        self, *, event: kopf.RawEvent, body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> None:
        """Carry out a rotation the Secret asks for (see the module docstring)."""
        if event["type"] == "DELETED" or name != DEFAULT_BROKER_SECRET or namespace is None:
            return
        annotations = dict(body.get("metadata", {}).get("annotations") or {})
        rolled: list[str] = []
        groups: list[ActorGroup] = []

        async def roll(value: str) -> None:
            rolled.extend(await self._kube.restart_deployments(namespace, name, value))
            groups.extend(
                owner
                for owner in (await self._kube.name_owners(namespace)).staying
                if isinstance(owner, ActorGroup) and owner.spec.broker.secret_name == name
            )
            for group in groups:
                key = (namespace, str(group.metadata["name"]))
                found = await self._kube.group_objects(*key)
                doomed = [(kind, each) for kind, each, _ in found if kind == "StatefulSet"]
                await self._kube.delete(namespace, doomed)
                self._admission.request(refresh=key)

        try:
            done = await self._identities.rotate(namespace, annotations, roll)
        except TransportError as exc:
            _log.error(
                "broker credentials not rotated; annotate the Secret again to retry",
                extra={"namespace": namespace, "error": str(exc)},
            )
            return
        if done is None:
            return
        fields = {"namespace": namespace, "deployments": rolled, "groups": len(groups)}
        _log.info("pods rolled for new broker credentials", extra=fields)
