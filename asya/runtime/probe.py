"""`python -m asya.runtime.probe`: exit 0 when the runtime answers a ping on its socket.

The runtime container's startup and liveness check in a pod (an exec probe the operator sets):
the socket exists only once the handler is loaded, and the server's loop answers pings while
calls run, so a loading model is waited for, a busy runtime stays alive, and a hung one is
restarted. Reads ASYA_SOCKET_PATH; exits 1 with one line on stderr when nothing answers within
`--timeout` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from asya.errors import AsyaError
from asya.runtime.client import RuntimeClient
from asya.settings import load_settings


async def ping(socket_path: str, timeout_s: float) -> None:
    """Connect, ping, close.

    Raises:
        AsyaError: nothing listens, or the runtime answered something else than a Pong.
        TimeoutError: no answer within `timeout_s`.
    """
    async with asyncio.timeout(timeout_s):
        client = RuntimeClient(socket_path)
        await client.connect()
        await client.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m asya.runtime.probe", description=__doc__)
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds (default: 3)")
    args = parser.parse_args(argv)
    try:
        socket_path = load_settings(os.environ).runtime.socket_path
        asyncio.run(ping(socket_path, args.timeout))
    except (AsyaError, OSError, TimeoutError) as exc:
        print(f"asya runtime probe: no answer: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
