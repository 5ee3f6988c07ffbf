"""The operator's kopf registry: `controller` (AsyncActors) and `group_controller`
(ActorGroups) register their handlers on it; `asya-operator run` runs kopf on it."""

from __future__ import annotations

import kopf

registry = kopf.OperatorRegistry()
"""The operator's handlers; `kopf.operator(registry=registry)` runs them."""
