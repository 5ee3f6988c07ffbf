"""A namespace's broker identity made and removed through RabbitMQ's management API, as an
administrator: what the platform engineer's guide does with `rabbitmqctl`, for the operator.

Its vhost, users, permissions and tags are `asya.broker_identity`'s. Every call is a PUT of the
whole state (idempotent: making an identity that exists sets its passwords and rights again,
which repairs a broker that lost them) or a DELETE (one already gone is no error). urllib in
a thread: one short request per step, no client library to keep.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, Final

from asya import broker_identity
from asya.errors import TransportError
from asya.status import without_credentials

HTTP_TIMEOUT_S: Final = 10.0


async def provision(admin_url: str, namespace: str, password: str, keda_password: str) -> None:
    """Make (or make again) `namespace`'s vhost and its two users, with these passwords.

    `admin_url`: the management API with an administrator's credentials
    (`http://admin:pass@host:15672/`).

    Raises:
        TransportError: the API cannot be reached or refuses a step (the message names it).
    """
    vhost = broker_identity.vhost(namespace)
    tags = ",".join(broker_identity.USER_TAGS)
    await _call(admin_url, "PUT", f"/api/vhosts/{_q(vhost)}", {})
    for user, secret, (configure, write, read) in (
        (broker_identity.actors_user(namespace), password, broker_identity.ACTORS_PERMISSIONS),
        (broker_identity.keda_user(namespace), keda_password, broker_identity.KEDA_PERMISSIONS),
    ):
        await _call(admin_url, "PUT", f"/api/users/{_q(user)}", {"password": secret, "tags": tags})
        permissions = {"configure": configure, "write": write, "read": read}
        await _call(admin_url, "PUT", f"/api/permissions/{_q(vhost)}/{_q(user)}", permissions)


async def remove(
    admin_url: str, namespace: str, *, ready: Callable[[list[str]], Awaitable[int]]
) -> bool:
    """Remove `namespace`'s two users, then its vhost if no queue there holds a message (a
    results stream keeps its records, a queue its envelopes: they stay for an administrator
    to read or move). Whether the vhost was removed.

    `ready` counts the messages ready in the vhost's queues (by name) as the broker does now
    (`asya.transport.rabbitmq_counts`): the management API's counts trail by seconds. The users
    go first, so that no connection of theirs holds a message unacked meanwhile.

    Raises:
        TransportError: the API cannot be reached or refuses a step.
    """
    vhost = broker_identity.vhost(namespace)
    for user in (broker_identity.actors_user(namespace), broker_identity.keda_user(namespace)):
        await _call(admin_url, "DELETE", f"/api/users/{_q(user)}", None)
    listed = await _call(
        admin_url, "GET", f"/api/queues/{_q(vhost)}?columns=name,messages,type", None
    )
    if listed is None:
        return True  # no such vhost: nothing left to remove
    if any(int(q.get("messages") or 0) for q in listed):
        return False
    # A stream answers no count to a declare; its count above is the API's.
    counted = [str(q["name"]) for q in listed if q.get("type") != "stream"]
    if counted and await ready(counted):
        return False
    await _call(admin_url, "DELETE", f"/api/vhosts/{_q(vhost)}", None)
    return True


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


async def _call(admin_url: str, method: str, path: str, body: object) -> Any:
    """One request; the decoded answer, or None for a 404 or an empty answer."""
    return await asyncio.to_thread(_request, admin_url, method, path, body)


def _request(admin_url: str, method: str, path: str, body: object) -> Any:
    parts = urllib.parse.urlsplit(admin_url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    query = ""
    if "?" in path:
        path, query = path.split("?", 1)
    url = urllib.parse.urlunsplit((parts.scheme, netloc, path, query, ""))
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("content-type", "application/json")
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_unredirected_header("Authorization", f"Basic {token}")
    shown = f"{method} {path} on {without_credentials(admin_url)}"
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            answer = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404 and method in ("GET", "DELETE"):
            return None
        detail = exc.read().decode(errors="replace")[:200]
        raise TransportError(f"{shown} answered {exc.code} {exc.reason}: {detail}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise TransportError(f"cannot reach the management API for {shown}: {exc}") from exc
    return json.loads(answer) if answer else None
