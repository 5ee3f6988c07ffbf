"""The ActorGroup `eval`'s two members: `leader` (rank 0) and `worker` (ranks 1 and up).

On Kubernetes each member's actor is `{group}-{member}` (`eval-leader`, `eval-worker`), so the
decorators name them so, and a local run routes to the same names. Each pod's runtime builds
its member's class once, before any envelope: that is where it rendezvouses.

- `Leader` (`eval-leader`): consumes the group's jobs. Each job's documents are scattered,
  one shard per rank, and the word counts gathered back and summed.
- `Worker` (`eval-worker`): joins rank 0 in `__init__` and then serves rank 0's shards on a
  thread. Its own queue normally stays empty: like torch.distributed's workers, it takes its
  work from rank 0, not from the broker. Sent a job directly, it counts the job alone.

Outside a group (no `ASYA_GROUP` variable: `asya dev`, pytest), the leader plays the whole
gang in its own process: it listens on 127.0.0.1 and starts the other ranks as threads with
the memberships the operator would give their pods (`GANG_LOCAL_SIZE`, default 4: one leader,
three workers). They rendezvous over real sockets with the same code as pods do.
"""

from __future__ import annotations

import os
import re
import threading
from collections import Counter
from collections.abc import Mapping

from asya import actor
from asya.gang import Membership, membership

from .rendezvous import DEFAULT_PORT, Gang, join, lead, listen

GROUP = "eval"
_WORD = re.compile(r"[a-z']+")


def count_words(documents: list[str]) -> dict[str, int]:
    """One rank's work: how often each word appears in its share of the documents."""
    return dict(Counter(word for doc in documents for word in _WORD.findall(doc.lower())))


def port(environ: Mapping[str, str] = os.environ) -> int:
    """`GANG_PORT`, where rank 0 listens."""
    return int(environ.get("GANG_PORT", DEFAULT_PORT))


def local_gang(size: int) -> Gang:
    """A gang of `size` ranks in this process: rank 0 here, the others on threads, all
    rendezvousing over 127.0.0.1 as an instance's pods do over the cluster network."""
    server = listen("127.0.0.1", 0)
    local_port = server.getsockname()[1]
    for rank in range(1, size):
        peer = Membership(
            group=GROUP,
            instance=0,
            member="worker",
            index=rank - 1,
            rank=rank,
            size=size,
            leader="127.0.0.1",
        )
        threading.Thread(
            target=join, args=(peer, local_port, count_words), name=f"join-{rank}", daemon=True
        ).start()
    me = Membership(
        group=GROUP, instance=0, member="leader", index=0, rank=0, size=size, leader="127.0.0.1"
    )
    with server:
        return lead(me, server)


@actor(name="eval-leader", max_replicas=1, timeout_s=120)
class Leader:
    """Rank 0: a job's documents in, word counts out, with each rank's share."""

    def __init__(self) -> None:
        me = membership(os.environ)
        if me is None:
            self.gang = local_gang(int(os.environ.get("GANG_LOCAL_SIZE", "4")))
        else:
            if me.rank != 0:
                raise RuntimeError(
                    f"eval-leader must be rank 0, got rank {me.rank}: list the"
                    " leader member first in the ActorGroup"
                )
            with listen("", port()) as server:
                self.gang = lead(me, server)

    def close(self) -> None:
        """asya calls it once when the worker stops: hang up on the other ranks."""
        self.gang.close()

    def __call__(self, job: dict) -> dict:
        counts = self.gang.scatter(job["documents"], count_words)
        total: Counter[str] = Counter()
        for part in counts:
            total.update(part)
        return {
            "job": job["job"],
            "ranks": self.gang.me.size,
            "words_per_rank": [sum(part.values()) for part in counts],
            "words": sum(total.values()),
            "top": [word for word, _ in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))[:3]],
        }


@actor(name="eval-worker", timeout_s=120)
class Worker:
    """Ranks 1 and up: join rank 0, then serve its shards (see the module docstring)."""

    def __init__(self) -> None:
        me = membership(os.environ)
        self.serving = None if me is None else join(me, port(), count_words)

    def __call__(self, job: dict) -> dict:
        counts = count_words(job["documents"])
        return {"job": job["job"], "ranks": 1, "words": sum(counts.values())}
