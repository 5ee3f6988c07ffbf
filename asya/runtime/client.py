"""RuntimeClient: the sidecar's side of the runtime socket, an Invoker over one connection.

Keeps one persistent connection, sends each call with a fresh request id and matches answers by
id, so many calls are in flight at once (pipelined, answered in any order). `connect` pings the
runtime first: its Pong says what it serves and the frame bounds it holds to, so a Call it
would refuse is never sent (its envelopes fail as `PayloadTooLarge`) and no Result larger than
it promised is read; its `protocol` picks the frames that runtime reads (`dialect`: this
version's protocol and the one before are served, `asya.runtime.protocols`). A broken
connection fails every call in flight with `RuntimeUnavailableError`: those envelopes are not
at fault and must not be failed.

With `direct_depth` set (the sidecar), the client asks for direct calls: if the runtime serves
them (its Pong says so), calls go to its workers on their own sockets
(`asya.runtime.direct.DirectCalls`, `direct_depth` calls queued per running one), and this
connection carries only pings, the workers' comings and goings, `Retire` and the runtime's
Drain. A runtime that does not serve them, or whose workers cannot be reached from here, is
called here, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from asya.envelope import Envelope, Reason
from asya.errors import RuntimeProtocolError, RuntimeUnavailableError
from asya.outcome import Failure, Outcome
from asya.runtime.direct import DirectCalls
from asya.runtime.frames import (
    CALL_FRAME_BYTES,
    HANDSHAKE_FRAME_BYTES,
    Call,
    Drain,
    Fault,
    Frame,
    FrameReader,
    FrameWriter,
    Ping,
    Pong,
    Result,
    Retire,
    Workers,
    encode_frame,
    pack_envelopes,
)
from asya.runtime.protocols import Dialect, dialect_of
from asya.runtime.requests import Request, Requests
from asya.settings import env_var

log = logging.getLogger(__name__)


class RuntimeClient:
    """See the module docstring. Use `connect()` (or `async with`) before calling."""

    def __init__(self, socket_path: str, *, direct_depth: int | None = None) -> None:
        self._path = socket_path
        self._direct_depth = direct_depth
        self.direct: DirectCalls | None = None
        """The runtime's workers, called directly, once connected to a runtime that serves
        direct calls (see the module docstring)."""
        self._asks_direct = direct_depth is not None
        """Whether each Ping asks for direct calls: until they turn out not to work."""
        self._worker_paths: list[str] = []
        """Where the runtime last said its workers listen (a Pong, then `Workers` frames)."""
        self._stopping = False
        """The runtime said it is stopping: no calls to it any more (`connected` is False)."""
        self._background: set[asyncio.Task[None]] = set()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._listener: asyncio.Task[None] | None = None
        self._requests: Requests[Frame, None] = Requests()
        self._frames: FrameWriter | None = None
        self._read_bytes = HANDSHAKE_FRAME_BYTES
        self.pong: Pong | None = None
        """The runtime's answer to the ping `connect` sends: its actor, capacity and bounds."""
        self.dialect: Dialect | None = None
        """What the runtime reads, by the protocol its Pong names."""

    async def __aenter__(self) -> RuntimeClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Open the connection and ping the runtime (see `pong`).

        Raises:
            RuntimeUnavailableError: nothing listens on the socket, or it closed at once.
            RuntimeProtocolError: the runtime speaks a frame protocol this side does not serve
                (`asya.runtime.protocols`).
        """
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(self._path)
        except OSError as exc:
            raise RuntimeUnavailableError(f"runtime socket {self._path}: {exc}") from exc
        self._frames = FrameWriter(self._writer)
        self._listener = asyncio.create_task(self._listen(self._reader))
        try:
            pong = await self.ping()
            self.dialect = dialect_of(pong.protocol)
            self.pong = pong
            if self._direct_depth is not None and pong.direct:
                await self._call_directly(pong, self._direct_depth)
        except BaseException:
            await self.aclose()
            raise

    async def _call_directly(self, pong: Pong, depth: int) -> None:
        direct = DirectCalls(pong, self, depth=depth)
        self.direct = direct  # from now on `Workers` frames reach it
        await direct.join(list(self._worker_paths))  # the latest: a `Workers` frame may follow
        if direct.unreachable:
            await self._call_through_the_runtime()
            return
        log.info(
            "calling the runtime's workers directly",
            extra={"socket": self._path, "workers": direct.workers},
        )

    def unreachable(self) -> None:
        """The pool's workers cannot be reached from here (`DirectCalls.unreachable`)."""
        task = asyncio.create_task(self._call_through_the_runtime())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _call_through_the_runtime(self) -> None:
        """Give up direct calls: call through the runtime's socket, and tell the runtime (a
        Ping without `direct`), so that it treats this as any caller there. Calls waiting for
        a worker are cut (`RuntimeUnavailableError`): the sidecar's link sends them again."""
        direct, self.direct = self.direct, None
        if direct is None:
            return
        log.warning(
            "the runtime's workers could not be called directly; calling through its socket",
            extra={"socket": self._path, "workers": self._worker_paths},
        )
        self._asks_direct = False
        await direct.aclose()
        with contextlib.suppress(RuntimeUnavailableError):
            await self.ping()

    async def wait_closed(self) -> None:
        """Return once the connection is down (closed by either side, or broken)."""
        if self._listener is not None:
            await asyncio.wait({self._listener})

    @property
    def connected(self) -> bool:
        """Whether calls can be sent: the connection is up, and the runtime has not said it
        is stopping (its calls held then wait for the next runtime, as after a lost one)."""
        return self._listener is not None and not self._listener.done() and not self._stopping

    async def ping(self) -> Pong:
        """Ask the runtime who it is; answers once its workers are ready.

        Raises:
            RuntimeUnavailableError: the connection is down or broke.
        """
        request = self._requests.open(None)
        try:
            frame = await self._exchange(request, encode_frame(Ping(request.id, self._asks_direct)))
        finally:
            self._requests.close(request.id)
        if not isinstance(frame, Pong):
            raise RuntimeProtocolError(f"expected a Pong, got {type(frame).__name__}")
        return frame

    async def invoke(self, envelopes: Sequence[Envelope]) -> list[Outcome]:
        """Call the handler on `envelopes`; one outcome each.

        Raises:
            RuntimeUnavailableError: the connection is down or broke during the call.
            RuntimeProtocolError: the runtime answered something else than a Result.
        """
        if self.pong is None:
            raise RuntimeUnavailableError(f"not connected to the runtime at {self._path}")
        if self.direct is not None:
            return await self._invoke_directly(self.direct, envelopes)
        request = self._requests.open(None)
        try:
            data = encode_frame(Call(request.id, list(envelopes)))
            limit = self.pong.bounds.call_bytes
            if len(data) > limit:
                # The runtime would close the connection on it, and the call would be sent again.
                return [_too_large(len(data), limit)] * len(envelopes)
            frame = await self._exchange(request, data)
        finally:
            self._requests.close(request.id)
        if isinstance(frame, Fault):
            raise RuntimeProtocolError(f"runtime refused the call: {frame.message}")
        if not isinstance(frame, Result) or len(frame.outcomes) != len(envelopes):
            raise RuntimeProtocolError("runtime answered a call with the wrong frame")
        return frame.outcomes

    async def _invoke_directly(
        self, direct: DirectCalls, envelopes: Sequence[Envelope]
    ) -> list[Outcome]:
        assert self.pong is not None
        packed = pack_envelopes(envelopes)
        count = len(envelopes)
        size, limit = len(packed) + CALL_FRAME_BYTES, self.pong.bounds.call_bytes
        if size > limit:
            # The worker would close the connection on it, and the call would be sent again.
            return [_too_large(size, limit)] * len(envelopes)
        if not self.connected:
            raise RuntimeUnavailableError(f"not connected to the runtime at {self._path}")
        outcomes = await direct.invoke_packed(packed, count)
        if len(outcomes) != count:
            raise RuntimeProtocolError("a worker answered a call with the wrong number of outcomes")
        return outcomes

    def retire(self, worker: str) -> None:
        """Tell the runtime to kill the worker at `worker` and start another."""
        if self._frames is not None and self.connected:
            self._frames.send(encode_frame(Retire(0, worker)))

    def drain(self) -> None:
        """Tell the runtime to start none of the calls it holds that have not started: it
        answers them `NotStarted` (their envelopes go back to the queue); later calls run.
        A runtime without the Drain frame (protocol 2) is told nothing: it would close the
        connection on one, and it holds no queued calls (`Dialect.pipeline_depth`)."""
        if self.dialect is None or not self.dialect.drains:
            return
        if self.direct is not None:
            self.direct.drain()
        elif self._frames is not None and self.connected:
            self._frames.send(encode_frame(Drain(0)))

    async def aclose(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.direct is not None:
            await self.direct.aclose()
        if self._writer is not None:
            assert self._frames is not None
            self._frames.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        self._fail_pending("the connection was closed")

    async def _exchange(self, request: Request[Frame, None], data: bytes) -> Frame:
        """Send `data`, the frame of `request`, and wait for its answer."""
        if self._writer is None or not self.connected:
            raise RuntimeUnavailableError(f"not connected to the runtime at {self._path}")
        try:
            assert self._frames is not None
            self._frames.send(data)
            await self._frames.drain()
            return await request.answer
        except ConnectionError as exc:
            raise RuntimeUnavailableError(f"runtime connection broke: {exc}") from exc

    async def _listen(self, reader: asyncio.StreamReader) -> None:
        why = "the runtime closed the connection"
        frames = FrameReader(reader)
        try:
            while True:
                frame = await frames.read(self._read_bytes)
                if frame is None:
                    break
                if isinstance(frame, Pong):
                    self._read_bytes = frame.bounds.result_bytes
                    if frame.direct:
                        self._worker_paths = frame.worker_paths
                elif isinstance(frame, Workers):
                    self._worker_paths = frame.paths
                    if self.direct is not None:
                        self.direct.update(frame.paths)
                    continue
                elif isinstance(frame, Drain):
                    # Sent only to a caller of the workers: the runtime is stopping.
                    self._stopping = True
                    if self.direct is not None:
                        self.direct.stopping()
                    continue
                self._requests.answer(getattr(frame, "id", -1), frame)
        except (RuntimeProtocolError, ConnectionError) as exc:
            why = f"the runtime connection failed: {exc}"
            log.error("runtime connection failed", extra={"error": str(exc)})
        self._fail_pending(why)

    def _fail_pending(self, why: str) -> None:
        self._requests.fail(lambda: RuntimeUnavailableError(why))


def _too_large(observed_bytes: int, limit_bytes: int) -> Failure:
    return Failure(
        reason=Reason.PAYLOAD_TOO_LARGE,
        type="PayloadTooLarge",
        message=f"the call takes {observed_bytes} bytes, over the bound of {limit_bytes} the"
        f" runtime reads: give the sidecar and the runtime the same {env_var('max_payload_bytes')}",
        retryable=False,
    )
