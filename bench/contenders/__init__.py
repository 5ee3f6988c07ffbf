"""The contenders, by name, in the order a run measures them.

A peer's module imports its library only when the peer runs, and says with `missing()` why it
cannot run here (not installed): the run then skips it, saying so.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final

from bench.contenders.base import Contender, Setup

ASYA: Final = ("asya-pods", "asya-serve")
PEERS: Final = ("raw-aio-pika", "raw-split", "dramatiq", "celery")
NAMES: Final = (*ASYA, *PEERS)

_FACTORIES: Final = {
    "asya-pods": ("bench.contenders.asya", "AsyaPods"),
    "asya-serve": ("bench.contenders.asya", "AsyaServe"),
    "raw-aio-pika": ("bench.contenders.raw_aio_pika", "RawAioPika"),
    "raw-split": ("bench.contenders.raw_aio_pika", "RawSplit"),
    "dramatiq": ("bench.contenders.dramatiq_peer", "Dramatiq"),
    "celery": ("bench.contenders.celery_peer", "CeleryPeer"),
}

DESCRIPTIONS: Final = {
    "asya-pods": "per hop a runtime (with its worker process) and a sidecar process",
    "asya-serve": "every hop in one `asya serve` process",
    "raw-aio-pika": "per hop one process: consume, publish with confirm, ack",
    "raw-split": "raw-aio-pika with each hop's handler in a second process (a Unix socket)",
    "dramatiq": "per hop one Dramatiq worker (threads), confirm_delivery",
    "celery": "per hop one Celery worker (threads pool), acks_late + confirm_publish",
}


def missing(name: str) -> str | None:
    """Why contender `name` cannot run here, or None."""
    module = importlib.import_module(_FACTORIES[name][0])
    check: Callable[[], str | None] | None = getattr(module, "missing", None)
    return None if check is None else check()


def make(name: str, setup: Setup) -> Contender:
    module_name, attr = _FACTORIES[name]
    factory: Callable[[Setup], Contender] = getattr(importlib.import_module(module_name), attr)
    return factory(setup)
