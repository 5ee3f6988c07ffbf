"""A namespace's broker identity, and what a credential reaches beyond its namespace.

Each namespace that runs actors gets its own RabbitMQ virtual host, `asya.{namespace}`, and two
users: `asya.{namespace}` for its actors and clients (every right, on that vhost only) and
`asya.{namespace}.keda` for KEDA (tag `management` and no right on any resource: it reads queue
depths through the management API and can do nothing else). A vhost per namespace, not a user
per namespace in one shared vhost, because RabbitMQ checks a publish against the *exchange*
only: a user that may write to the default exchange (which replies use) or to the shared
`asya` exchange can put a message into any queue of the vhost, whatever its queue permissions
say. Between vhosts nothing is shared: a credential of one namespace cannot open another's
vhost at all (docs/tenancy.md).

Pure: `reach_notes` takes what a credential sees (its vhost's queues, the vhosts it may open,
its tags) and says in words what it reaches beyond its namespace; `asya status` reads those.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from typing import Final

ACTORS_PERMISSIONS: Final = (".*", ".*", ".*")
"""configure, write, read of a namespace's own user, on its own vhost only."""

KEDA_PERMISSIONS: Final = ("^$", "^$", "^$")
"""configure, write, read of a namespace's KEDA user on the namespace's vhost: none. It may
open the vhost (so the management API shows it the vhost's queues), and nothing more."""

USER_TAGS: Final = ("management",)
"""Tags of both users: `management` lets each read its own vhost through the management API
(`asya status`, KEDA) and nothing of another vhost."""

OVERREACHING_TAGS: Final = frozenset({"administrator", "monitoring", "policymaker"})
"""Tags that see or change other vhosts than the user's own."""

GUIDE: Final = "docs/tenancy.md"

_PREFIXES: Final = ("asya.", "asya-")
# An actor's queues begin `asya.{ns}.`; a namespace's parking queue, streams and replies
# `asya-{ns}.` (asya.queue_names, asya.transport.base).


def vhost(namespace: str) -> str:
    """The vhost of `namespace`'s queues, streams and replies: `asya.{namespace}`."""
    return f"asya.{namespace}"


def actors_user(namespace: str) -> str:
    """The user `namespace`'s actors and clients connect as: `asya.{namespace}`."""
    return f"asya.{namespace}"


def keda_user(namespace: str) -> str:
    """The user KEDA reads `namespace`'s queue depths as: `asya.{namespace}.keda` (a `.` is in
    no namespace, so no namespace's own user has this name)."""
    return f"{actors_user(namespace)}.keda"


def identity_urls(
    admin_amqp_url: str,
    admin_management_url: str,
    namespace: str,
    password: str,
    keda_password: str,
) -> tuple[str, str]:
    """The `amqp-url` and `management-url` of `namespace`'s broker Secret: the hosts, ports and
    schemes of an administrator's URLs, with the namespace's users, passwords and vhost."""
    return (
        _as_user(admin_amqp_url, actors_user(namespace), password, vhost(namespace)),
        _as_user(admin_management_url, keda_user(namespace), keda_password, vhost(namespace)),
    )


def on_vhost(url: str, path_vhost: str) -> str:
    """`url` (its scheme, credentials, host and port) on the vhost `path_vhost`."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(
        parts._replace(path="/" + urllib.parse.quote(path_vhost, safe=""), query="")
    )


def passwords_of(amqp_url: str, management_url: str) -> tuple[str, str]:
    """The (actors', KEDA's) passwords in a broker Secret's URLs ("" where none is given)."""
    return (
        urllib.parse.unquote(urllib.parse.urlsplit(amqp_url).password or ""),
        urllib.parse.unquote(urllib.parse.urlsplit(management_url).password or ""),
    )


def _as_user(url: str, user: str, password: str, path_vhost: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    auth = f"{urllib.parse.quote(user, safe='')}:{urllib.parse.quote(password, safe='')}"
    path = "/" + urllib.parse.quote(path_vhost, safe="")
    return urllib.parse.urlunsplit((parts.scheme, f"{auth}@{host}", path, "", ""))


def namespace_of_queue(queue: str) -> str | None:
    """The namespace a queue of asya's belongs to, or None for another's queue: an actor's
    (`asya.{ns}.{actor}…`) or the namespace's parking queue, streams and replies
    (`asya-{ns}.{kind}…`). Names of before `.` told namespaces apart (`asya-{ns}-{actor}`)
    belong to no one namespace and give None."""
    for prefix in _PREFIXES:
        if queue.startswith(prefix):
            namespace, dot, _ = queue[len(prefix) :].partition(".")
            return namespace if dot and namespace else None
    return None


def reach_notes(
    namespace: str,
    own_vhost: str,
    queues: Iterable[str],
    vhosts: Iterable[str] | None,
    tags: Iterable[str] | None,
    user: str | None,
) -> list[str]:
    """One note when the credential `asya status` reads `namespace` with reaches more than the
    namespace: other namespaces' queues in its vhost (their credentials reach these queues as
    much as this one reaches theirs), other vhosts it may open, tags that see every vhost.
    None of those: no note. `vhosts` and `tags` are None when they could not be read."""
    others = sorted({ns for q in queues if (ns := namespace_of_queue(q)) not in (None, namespace)})
    other_vhosts = sorted(set(vhosts or ()) - {own_vhost})
    if not others and not other_vhosts:
        # One namespace on its own vhost: whatever the tags, nothing of another team's is here.
        return []
    reach = []
    if others:
        reach.append(
            f"vhost {own_vhost} also holds the queues of namespace(s) {_some(others)}, so"
            " a credential of any of them can consume, purge or publish into this one's, and"
            " this one into theirs"
        )
    if other_vhosts:
        reach.append(f"it may open vhost(s) {_some(other_vhosts)} besides {own_vhost}")
    wide = sorted(set(tags or ()) & OVERREACHING_TAGS)
    if wide:
        reach.append(f"it is tagged {', '.join(wide)}")
    who = f"broker user {user}" if user else "the broker credential"
    return [
        f"{who} reaches more than namespace {namespace} needs: {'; '.join(reach)}. Give each"
        f" namespace its own vhost and users ({GUIDE})"
    ]


def _some(names: list[str], shown: int = 5) -> str:
    """`names` for a note: the first `shown`, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
