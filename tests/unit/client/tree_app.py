"""An app whose payload draws its own fan-out tree, for tests of waiting on a whole call.

`tree` fans a list out into its items; an item that is itself a list goes round `tree` again
(a nested fan-out), and an empty list ends there (a fan-out to zero children). Every other item
goes on to `check`, which fails on "bad" and takes a minute over "slow". So
`[1, [2, 3], [], "bad"]` ends in five finals, one of them failed.
"""

import asyncio

from asya import PermanentError, actor

ROUTE = ["tree", "check"]


@actor
def tree(node, ctx):
    after = list(ctx.route.next)
    for item in node:
        ctx.route.next = ["tree", *after] if isinstance(item, list) else after
        yield item


@actor(concurrency=4)
async def check(item):
    if item == "slow":
        await asyncio.sleep(60)
    if item == "bad":
        raise PermanentError("a bad item")
    return item
