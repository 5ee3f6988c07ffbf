"""Rendezvous of a gang's ranks, and scatter/gather between rank 0 and the others.

The operator gives every pod of an ActorGroup instance its rank, the instance's size and rank
0's DNS name (`asya.gang.membership(os.environ)`). Before any work, rank 0 listens on
`GANG_PORT` and every other rank connects to it and says which rank it is; once all `size`
ranks are there, rank 0 tells each that the gang is complete. Only then do they work: rank 0
splits each job into one shard per rank, keeps shard 0, sends the others over the
connections, and gathers the results in rank order. torch.distributed's TCP rendezvous works
the same way; this one is the standard library only, JSON lines over TCP, so the example runs
anywhere.

A rank that starts before rank 0 listens (or before its DNS name resolves) retries until
`timeout_s`. Each worker rank serves rank 0 on a thread of its own until rank 0 hangs up.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from asya.gang import Membership

DEFAULT_PORT = 29500
"""Where rank 0 listens (torch.distributed's usual port)."""
TIMEOUT_S = 240.0
"""How long a rank waits for the gang to be complete: under the runtime's 300 s for a
worker to start, so a gang that cannot form fails its pods' start, and the operator's
readiness timeout evicts and requeues it whole."""

Shard = Callable[[list[Any]], Any]
"""The work one rank does on its share of a job."""


class RendezvousError(Exception):
    """The gang did not form: a rank is missing, or one said something unexpected."""


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _receive(reader: Any) -> dict[str, Any] | None:
    line = reader.readline()
    return json.loads(line) if line else None


@dataclass
class Gang:
    """Rank 0, once every other rank has joined: the connections, in rank order."""

    me: Membership
    peers: list[tuple[socket.socket, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def scatter(self, items: Sequence[Any], work: Shard) -> list[Any]:
        """Split `items` round-robin into one shard per rank, have each rank do `work` on its
        own, and return the results in rank order (rank 0's first).

        Raises:
            RendezvousError: a rank hung up or answered out of turn.
        """
        shards = [list(items[rank :: self.me.size]) for rank in range(self.me.size)]
        with self.lock:  # one job at a time on the connections
            for rank, (conn, _) in enumerate(self.peers, start=1):
                _send(conn, {"shard": shards[rank]})
            results = [work(shards[0])]
            for rank, (_, reader) in enumerate(self.peers, start=1):
                reply = _receive(reader)
                if reply is None or "result" not in reply:
                    raise RendezvousError(f"rank {rank} left the gang mid-job")
                results.append(reply["result"])
        return results

    def close(self) -> None:
        """Hang up on every rank: their serving threads end."""
        for conn, reader in self.peers:
            reader.close()
            conn.close()


def lead(me: Membership, server: socket.socket, timeout_s: float = TIMEOUT_S) -> Gang:
    """As rank 0: wait on `server` until every other rank has joined, then tell them all.

    Raises:
        RendezvousError: not every rank joined within `timeout_s`, or a rank said something
            other than a new rank of this gang.
    """
    opened: list[tuple[socket.socket, Any]] = []
    joined: dict[int, tuple[socket.socket, Any]] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(joined) < me.size - 1:
            server.settimeout(max(0.0, deadline - time.monotonic()))
            try:
                conn, _ = server.accept()
            except TimeoutError:
                missing = sorted(set(range(1, me.size)) - set(joined))
                raise RendezvousError(
                    f"gang {me.group}[{me.instance}]: ranks {missing} did not join within"
                    f" {timeout_s:g} s"
                ) from None
            conn.settimeout(max(0.0, deadline - time.monotonic()))
            opened.append((conn, conn.makefile("r", encoding="utf-8")))
            hello = _receive(opened[-1][1])
            rank = hello.get("rank") if hello else None
            if not isinstance(rank, int) or not 0 < rank < me.size or rank in joined:
                raise RendezvousError(f"unexpected rendezvous message {hello!r}")
            conn.settimeout(None)
            joined[rank] = opened[-1]
        for conn, _ in joined.values():
            _send(conn, {"ready": True, "size": me.size})
    except BaseException:
        Gang(me, opened).close()
        raise
    return Gang(me, [joined[rank] for rank in sorted(joined)])


def join(me: Membership, port: int, work: Shard, timeout_s: float = TIMEOUT_S) -> threading.Thread:
    """As a rank other than 0: connect to rank 0 (retrying until `timeout_s`), wait until the
    gang is complete, then serve rank 0's shards on a thread; returns that thread.

    Raises:
        RendezvousError: rank 0 could not be reached, or the gang did not form.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = socket.create_connection((me.leader, port), timeout=5)
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                raise RendezvousError(
                    f"rank {me.rank}: rank 0 at {me.leader}:{port} unreachable: {exc}"
                ) from exc
            time.sleep(0.5)
    conn.settimeout(max(1.0, deadline - time.monotonic()))
    reader = conn.makefile("r", encoding="utf-8")
    _send(conn, {"rank": me.rank, "member": me.member})
    try:
        ready = _receive(reader)
    except TimeoutError:
        ready = None
    if not ready or not ready.get("ready"):
        raise RendezvousError(f"rank {me.rank}: the gang did not form (rank 0 said {ready!r})")
    conn.settimeout(None)

    def serve() -> None:
        with conn, reader:
            while (message := _receive(reader)) is not None:
                _send(conn, {"result": work(message["shard"])})

    thread = threading.Thread(target=serve, name=f"rank-{me.rank}", daemon=True)
    thread.start()
    return thread


def listen(host: str, port: int) -> socket.socket:
    """The socket rank 0 listens on (`port` 0 picks a free one)."""
    return socket.create_server((host, port))
