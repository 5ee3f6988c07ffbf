"""A gang member's place in its group, for handlers that must rendezvous (distributed training,
sharded inference): which ActorGroup instance the pod belongs to, its rank and the group's size,
and where rank 0 is.

The operator sets `ASYA_GROUP*` on every pod of an ActorGroup's members (see
`asya.settings.GangSettings`); `membership` reads them. A handler class calls it in `__init__`,
which runs once per worker before any envelope, the place to join a process group:

    from asya.gang import membership

    class Trainer:
        def __init__(self):
            me = membership(os.environ)
            torch.distributed.init_process_group(
                "nccl", init_method=f"tcp://{me.leader}:29500", rank=me.rank, world_size=me.size
            )
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import msgspec

from asya.errors import SettingsError
from asya.settings import GangSettings, env_var, load_group


@dataclasses.dataclass(frozen=True)
class Membership:
    """One pod's place in its gang instance."""

    group: str
    instance: int
    member: str
    index: int
    """Among the member's own pods, from 0."""
    rank: int
    """Among every pod of the instance, from 0: the members' pods in the group's member order."""
    size: int
    """Pods in the instance."""
    leader: str
    """DNS name of the rank-0 pod."""


def membership(environ: Mapping[str, str]) -> Membership | None:
    """This pod's place in its gang, from `environ` (pass `os.environ`); None outside a group.

    Raises:
        SettingsError: a variable is invalid, or the group is named but another is missing.
    """
    values = msgspec.structs.asdict(load_group(GangSettings, environ))
    if values["group"] is None:
        return None
    missing = [env_var(name) for name, value in values.items() if value is None]
    if missing:
        raise SettingsError(
            f"{env_var('group')} is set but {', '.join(missing)} not: a gang member's pod gets"
            " them all from the operator",
            variable=missing[0],
            value=None,
        )
    return Membership(
        group=values["group"],
        instance=values["group_instance"],
        member=values["group_member"],
        index=values["group_member_index"],
        rank=values["group_rank_offset"] + values["group_member_index"],
        size=values["group_size"],
        leader=values["group_leader"],
    )
