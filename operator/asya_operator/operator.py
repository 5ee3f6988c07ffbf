"""The operator, wired: one cluster client, one admission loop, the reconcilers and kopf's
handlers on a registry of their own.

`build(config)` makes each part with what it depends on, explicitly (nothing is looked up in
kopf's `memo`), and returns the registry `kopf.run` / `kopf.operator` runs: `asya-operator run`
does, and the tests run it against a stand-in cluster. At startup the client is pointed at the
cluster, the admission loop starts and the /healthz and /metrics port opens; at cleanup both
stop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import kopf

from asya.health import HealthServer
from asya_operator import metrics
from asya_operator.config import OperatorConfig
from asya_operator.handlers.actors import ActorHandlers
from asya_operator.handlers.groups import GroupHandlers
from asya_operator.handlers.identities import IdentityHandlers
from asya_operator.handlers.namespaces import NamespaceHandlers
from asya_operator.identities import Identities
from asya_operator.kube import Kube
from asya_operator.reconcile.actors import ActorReconciler
from asya_operator.reconcile.admission import AdmissionLoop
from asya_operator.reconcile.groups import GroupReconciler


@dataclasses.dataclass
class Operator:
    """The operator's parts, as `build` made them."""

    config: OperatorConfig
    kube: Kube
    admission: AdmissionLoop
    health: HealthServer
    registry: kopf.OperatorRegistry

    async def start(self, **_: Any) -> None:
        """Point the client at the cluster, start the admission loop, open the health port."""
        await self.kube.connect()
        self.admission.start()
        await self.health.start()

    async def stop(self, **_: Any) -> None:
        """Close the health port, stop the admission loop, end the cluster client's calls."""
        await self.health.stop()
        await self.admission.stop()
        await self.kube.close()


def build(
    config: OperatorConfig,
    *,
    namespaces: Sequence[str] = (),
    clock: Callable[[], float] = time.time,
) -> Operator:
    """The operator for `config`, its handlers on `Operator.registry`: watching `namespaces`
    only, or every namespace (none); `clock` is the admission loop's (Unix seconds)."""
    kube = Kube(*namespaces, timeout_s=config.api_timeout_s, threads=config.api_threads)
    admission = AdmissionLoop(kube, config, clock=clock)
    identities = Identities(kube, config)
    actors = ActorReconciler(
        kube,
        config,
        settle=admission.settle,
        between_passes=admission.between_passes,
        identities=identities,
    )
    groups = GroupReconciler(kube, config, settle=admission.settle, identities=identities)
    # Live while kopf's event loop answers; the metrics are the operator's own.
    health = HealthServer(config.port, live=_always, ready=_always, metrics=metrics.exposition)
    registry = kopf.OperatorRegistry()
    operator = Operator(config, kube, admission, health, registry)
    kopf.on.startup(registry=registry, id="configure")(operator.start)
    kopf.on.cleanup(registry=registry, id="stop_health")(operator.stop)
    ActorHandlers(actors, admission, retry_s=config.recheck_s).register(registry)
    GroupHandlers(groups, admission, kueue=config.admission == "kueue").register(registry)
    IdentityHandlers(identities, kube, admission).register(registry)
    NamespaceHandlers(actors, admission, retry_s=config.recheck_s).register(registry)
    return operator


def _always() -> bool:
    return True
