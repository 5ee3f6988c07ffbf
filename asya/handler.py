"""Calling conventions: turn any kind of actor into one async `invoke(envelopes) -> outcomes`.

The single place where user code is called. It adapts sync and async functions, generators
(fan-out), classes (instantiated once per worker, and closed once when the worker stops, if
they have a `close()`) and batch handlers (list in, list out, with
one `Context` per payload); it builds the contexts and reads each one's route and headers back
per output, converts typed payloads at the edge (`asya.payload_types`), enforces the actor's
timeout, and turns whatever happened into an `Outcome`. Sync code runs on daemon threads: a
call stuck past its timeout is reported as `Timeout` and its thread abandoned and replaced, and
it can never hold the process open at exit. (The runtime goes further and runs this inside a
worker process it can kill; see `asya.runtime.workers`.) Callers: the local runner, the
runtime's worker processes.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import importlib
import inspect
import logging
import queue
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, TypeVar

from asya.actor import ActorSpec, CallStyle, build_spec, spec_of
from asya.context import Context
from asya.envelope import Envelope, Payload, Reason
from asya.errors import ActorDefinitionError
from asya.outcome import Emitted, Failure, NotStarted, Outcome, Success
from asya.payload_types import PayloadMismatchError, to_payload
from asya.retry import is_retryable

log = logging.getLogger(__name__)

R = TypeVar("R")


class Invoker(Protocol):
    """Calls an actor's handler on envelopes; one outcome per envelope, in order.

    An invoker takes more calls than it runs at once and starts the waiting ones in the order
    they came, so the next call is ready the moment one ends. `drain` turns the ones waiting now
    away as `NotStarted`; calls already running go on, and later calls are served as usual.
    """

    async def invoke(self, envelopes: Sequence[Envelope]) -> list[Outcome]: ...

    def drain(self) -> None: ...

    async def aclose(self) -> None: ...


class CallGate:
    """At most `size` calls at once, started in the order they came; `turn_away` turns away
    the ones waiting now, `close` those and every later one."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiting: collections.deque[asyncio.Future[bool]] = collections.deque()
        self.closed = False

    async def enter(self) -> bool:
        """Wait for a free place; False if the gate closed first (do not start the call)."""
        if self.closed:
            return False
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return True
        turn: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled() and turn.result():
                self.leave()  # given a place just as it was cancelled: pass it on
            else:
                self._waiting.remove(turn)
            raise

    def leave(self) -> bool:
        """A call that entered has ended: the first one waiting starts (True: one did)."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(True)
                return True
        self._free += 1
        return False

    def close(self) -> None:
        self.closed = True
        self.turn_away()

    def turn_away(self) -> None:
        waiting, self._waiting = self._waiting, collections.deque()
        for turn in waiting:
            if not turn.done():
                turn.set_result(False)


def load_handler(ref: str) -> ActorSpec:
    """The actor at `module:attr`; an undecorated function or class gets default options.

    Raises:
        ActorDefinitionError: the reference is malformed, or the module or attribute is missing.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ActorDefinitionError(f"handler reference '{ref}' must look like 'module:attr'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ActorDefinitionError(f"cannot import handler module '{module_name}': {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ActorDefinitionError(
                f"module '{module_name}' has no attribute '{attr}' (handler reference '{ref}')"
            ) from None
    return spec_of(target) or build_spec(target, {})


def timeout_failure(spec: ActorSpec) -> Failure:
    """The outcome of a call that ran past the actor's timeout."""
    return Failure(
        reason=Reason.TIMEOUT,
        type="Timeout",
        message=f"'{spec.name}' ran past its timeout of {spec.timeout_s:g} s",
        retryable=spec.retry.retry_timeouts,
    )


def exception_failure(spec: ActorSpec, error: BaseException) -> Failure:
    """The outcome of a call that raised `error`."""
    kind = type(error)
    return Failure(
        reason=Reason.HANDLER_ERROR,
        type=f"{kind.__module__}.{kind.__qualname__}",
        message=str(error) or kind.__name__,
        retryable=is_retryable(spec.retry, error),
        traceback="".join(traceback.format_exception(kind, error, _user_frames(error))),
    )


def _user_frames(error: BaseException) -> TracebackType | None:
    # Start the traceback at user code: frames of this module are noise to whoever reads it.
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return tb


class LocalInvoker:
    """Runs an actor's handler in this process; one instance per worker (replica)."""

    def __init__(
        self,
        spec: ActorSpec,
        *,
        slots: int | None = None,
        on_abandon: Callable[[], None] | None = None,
    ) -> None:
        """`slots`: calls run at once (default: the actor's concurrency); more wait their
        turn. `on_abandon` is told when a timed-out thread had to be left running."""
        self.spec = spec
        self._gate = CallGate(spec.concurrency if slots is None else slots)
        self._on_abandon = on_abandon
        self._threads = _DaemonThreads(f"asya-{spec.name}")
        self._func: Callable[..., Any] | None = None
        self._starting = asyncio.Lock()
        self._closed = False

    async def start(self) -> None:
        """Instantiate a class actor (its `__init__` may load a model: it runs on a thread).
        Once closed, nothing is made any more (a later call is `NotStarted`).

        Raises:
            ActorDefinitionError: the class's `__init__` raised.
        """
        if self._func is not None:  # every call asks: no lock once started
            return
        async with self._starting:
            if self._func is not None or self._closed:
                return
            if not self.spec.is_class:
                self._func = self.spec.target
                return
            try:
                self._func = await asyncio.wrap_future(self._threads.submit(self.spec.target))
            except Exception as exc:
                raise ActorDefinitionError(
                    f"actor '{self.spec.name}': {self.spec.qualname}() raised {exc!r}",
                    actor=self.spec.name,
                ) from exc

    def drain(self) -> None:
        self._gate.turn_away()

    def refuse(self) -> None:
        """Start no call from now on: the waiting ones and every later one are `NotStarted`."""
        self._gate.close()

    async def aclose(self) -> None:
        """Start no more calls; a class actor's `close()`, if it has one, runs now (once),
        after an `__init__` in progress has returned."""
        self._gate.close()
        try:
            async with self._starting:
                self._closed = True
                instance, self._func = (self._func if self.spec.is_class else None), None
            if instance is not None:
                await self._close(instance)
        finally:
            self._threads.close()

    async def _close(self, instance: Any) -> None:
        """Call `instance.close()` (sync on a thread, or awaited), bounded by the actor's
        timeout; what it raises, or a timeout, is logged: the worker stops all the same. Not
        while a call still runs on a thread (one that ran past its timeout cannot be stopped
        in this process): closing what it uses under it could crash it or corrupt its result."""
        close = getattr(instance, "close", None)
        if not callable(close):
            return
        name, limit_s = self.spec.name, self.spec.timeout_s
        running = self._threads.running
        if running:
            log.warning(
                "close() not called: calls still run on threads (past their timeout, or cut"
                " by the drain's grace), and would find what it releases gone",
                extra={"actor": name, "running": running},
            )
            return
        try:
            async with asyncio.timeout(limit_s):
                if inspect.iscoroutinefunction(close):
                    await close()
                else:
                    job = self._threads.submit(close)
                    try:
                        done = await asyncio.wrap_future(job)
                    except asyncio.CancelledError:
                        self._threads.abandon(job)
                        raise
                    if inspect.isawaitable(done):  # a sync `close` that hands back a coroutine
                        await done
        except TimeoutError:
            log.warning(
                "close() ran past the actor's timeout; the worker stops without it",
                extra={"actor": name, "timeout_s": limit_s},
            )
        except Exception:
            log.exception("close() raised; the worker stops all the same", extra={"actor": name})

    async def invoke(self, envelopes: Sequence[Envelope]) -> list[Outcome]:
        await self.start()
        # Payloads loaded and contexts made before the call's turn, while the one before it
        # runs: the device waits on none of it.
        if self.spec.batch is not None:
            batch = self._prepare_batch(envelopes)
        else:
            calls = [self._prepare_one(envelope) for envelope in envelopes]
        if not await self._gate.enter():
            return [NotStarted()] * len(envelopes)
        turn = _Turn(self._gate)
        try:
            # The timeout counts from here: time spent waiting for a turn is not the call's.
            if self.spec.batch is not None:
                outcomes = await self._invoke_batch(batch, turn)
            elif len(calls) == 1:
                outcomes = [await self._invoke_one(calls[0])]
            else:
                outcomes = list(await asyncio.gather(*(self._invoke_one(c) for c in calls)))
        finally:
            woke = turn.end()
        if woke:
            # The next call starts (on the device) before this one's outputs are checked,
            # encoded and sent: that work overlaps it instead of holding the device idle.
            await asyncio.sleep(0)
        return outcomes

    def _prepare_one(self, envelope: Envelope) -> tuple[tuple[Any, ...], Context] | Failure:
        """The handler's arguments and the call's context; the failure of a payload that does
        not fit the handler's model."""
        payload = self._load(envelope.payload)
        if isinstance(payload, Failure):
            return payload
        ctx = Context.from_envelope(envelope, self.spec.retry.max_attempts)
        return ((payload, ctx) if self.spec.takes_context else (payload,)), ctx

    async def _invoke_one(self, call: tuple[tuple[Any, ...], Context] | Failure) -> Outcome:
        if isinstance(call, Failure):
            return call
        args, ctx = call
        try:
            result = await self._run(args, ctx)
        except TimeoutError:
            return timeout_failure(self.spec)
        except _InvalidOutputError as exc:
            return self._invalid_output(str(exc))
        except Exception as exc:
            return exception_failure(self.spec, exc)
        return result

    def _load(self, payload: Payload) -> Any:
        """The payload as the handler declared it: an instance of its model, or as it came;
        the `Failure` of a payload that does not fit the model (no payload is one)."""
        payload_type = self.spec.payload_type
        if payload_type is None:
            return payload
        try:
            return payload_type.load(payload)
        except PayloadMismatchError as exc:
            return self._mismatch_failure(exc)
        except Exception as exc:  # the model's own validator raised something else
            return exception_failure(self.spec, exc)

    def _mismatch_failure(self, exc: PayloadMismatchError) -> Failure:
        # The same payload fails the same way on every attempt: permanent.
        payload_type = self.spec.payload_type
        assert payload_type is not None
        return Failure(
            reason=Reason.MALFORMED_ENVELOPE,
            type="MalformedEnvelope",
            message=f"'{self.spec.name}' takes a {payload_type.name} ({payload_type.kind.value})"
            f" and the payload does not fit it: {exc}",
            retryable=False,
        )

    def _invalid_output(self, problem: str) -> Failure:
        return Failure(
            reason=Reason.INVALID_OUTPUT,
            type="InvalidOutput",
            message=f"'{self.spec.name}': {problem}",
            retryable=False,
        )

    async def _run(self, args: tuple[Any, ...], ctx: Context) -> Success:
        func = self._func
        assert func is not None
        style = self.spec.style
        async with asyncio.timeout(self.spec.timeout_s):
            if style is CallStyle.ASYNC_RETURN:
                return _returned(await func(*args), ctx)
            if style is CallStyle.ASYNC_GENERATOR:
                return Success(
                    outputs=tuple([_emit(v, ctx) async for v in func(*args)]), fan_out=True
                )
            if style is CallStyle.GENERATOR:
                emitted = self._threads.submit(lambda: tuple(_emit(v, ctx) for v in func(*args)))
                return Success(outputs=await self._wait(emitted), fan_out=True)
            returned = self._threads.submit(lambda: _returned(func(*args), ctx))
            return await self._wait(returned)

    async def _wait(self, job: concurrent.futures.Future[R]) -> R:
        try:
            return await asyncio.wrap_future(job)
        except asyncio.CancelledError:
            if not job.done():
                self._threads.abandon(job)
                fields = {"actor": self.spec.name, "timeout_s": self.spec.timeout_s}
                if self._on_abandon is not None:  # a worker process: it leaves, and the call
                    log.warning("handler ran past its timeout; the worker exits", extra=fields)
                    self._on_abandon()
                else:
                    log.warning(
                        "handler still running past its timeout: its thread cannot be stopped"
                        " and is left to finish (it ends with the process at the latest); run"
                        " with --isolate, or under asya serve, to have such a call killed",
                        extra=fields,
                    )
            raise

    def _prepare_batch(self, envelopes: Sequence[Envelope]) -> _Batch:
        """The payloads that fit the handler's model and their contexts; a payload that does
        not fails alone."""
        outcomes: list[Outcome | None] = [None] * len(envelopes)
        called: list[int] = []
        payloads: list[Any] = []
        for index, envelope in enumerate(envelopes):
            payload = self._load(envelope.payload)
            if isinstance(payload, Failure):
                outcomes[index] = payload
            else:
                payloads.append(payload)
                called.append(index)
        ctxs = [Context.from_envelope(envelopes[i], self.spec.retry.max_attempts) for i in called]
        return _Batch(outcomes, called, payloads, ctxs)

    async def _invoke_batch(self, batch: _Batch, turn: _Turn) -> list[Outcome]:
        """One call on the payloads that fit the handler's model; an item the handler answers
        with an exception, or whose output or context cannot leave the call, fails alone."""
        outcomes, called, payloads, ctxs = batch.outcomes, batch.called, batch.payloads, batch.ctxs
        if called:
            # The handler gets a list of its own: reordering it cannot mix the items' routes up.
            args = (payloads, list(ctxs)) if self.spec.takes_context else (payloads,)
            called_outcomes = await self._call_batch(args, ctxs, turn)
            for index, outcome in zip(called, called_outcomes, strict=True):
                outcomes[index] = outcome
        return [outcome for outcome in outcomes if outcome is not None]

    async def _call_batch(
        self, args: tuple[Any, ...], ctxs: list[Context], turn: _Turn
    ) -> list[Outcome]:
        func = self._func
        assert func is not None
        try:
            async with asyncio.timeout(self.spec.timeout_s):
                if self.spec.style.is_async:
                    results = await func(*args)
                else:
                    results = await self._wait(self._threads.submit(func, *args))
        except TimeoutError:
            return [timeout_failure(self.spec)] * len(ctxs)
        except Exception as exc:
            return [exception_failure(self.spec, exc)] * len(ctxs)
        if turn.end():  # the handler is done: the next call starts while these are converted
            await asyncio.sleep(0)
        if not isinstance(results, list | tuple) or len(results) != len(ctxs):
            got = f"{len(results)} items" if isinstance(results, list | tuple) else repr(results)
            failure = self._invalid_output(
                f"batch handler got {len(ctxs)} payloads and must return a list of as many"
                f" results, got {got}"
            )
            return [failure] * len(ctxs)
        outcomes: list[Outcome] = []
        for value, ctx in zip(results, ctxs, strict=True):
            if isinstance(value, Exception):  # the handler failed this item alone
                outcomes.append(exception_failure(self.spec, value))
                continue
            try:
                outcomes.append(_returned(value, ctx))
            except _InvalidOutputError as exc:  # this item's alone: its batch-mates go on
                outcomes.append(self._invalid_output(str(exc)))
        return outcomes


@dataclass(frozen=True, slots=True)
class _Batch:
    """A batch call made ready before its turn."""

    outcomes: list[Outcome | None]
    """Per envelope: its failure if its payload did not fit the model, else None (called)."""
    called: list[int]
    """Which envelopes' payloads the handler gets, in order."""
    payloads: list[Any]
    ctxs: list[Context]


class _Turn:
    """A call's place in its `CallGate`, given up once: as soon as the handler is done (a
    batch's outputs are converted after), or when the call ends at the latest."""

    __slots__ = ("_gate", "_held")

    def __init__(self, gate: CallGate) -> None:
        self._gate = gate
        self._held = True

    def end(self) -> bool:
        """Give the place up (once); whether that started a waiting call just now."""
        if not self._held:
            return False
        self._held = False
        return self._gate.leave()


class _InvalidOutputError(Exception):
    """The handler returned a model instance that does not convert, or left values in
    `route.next` or `headers` that are not strings."""


def _emit(value: Any, ctx: Context) -> Emitted:
    # Snapshot at emit time: a generator may set a different route before each yield.
    next_ = tuple(ctx.route.next)
    headers = dict(ctx.headers)
    # Checked here, in the one place user values leave a call: past it, routing and the
    # runtime's frames take them for strings (a worker would die decoding them).
    for name in next_:
        if not isinstance(name, str):
            raise _InvalidOutputError(f"route.next must hold actor names (strings), got {name!r}")
    for key, text in headers.items():
        if not isinstance(key, str) or not isinstance(text, str):
            raise _InvalidOutputError(f"headers must map strings to strings, got {key!r}: {text!r}")
    try:
        payload = to_payload(value)
    except PayloadMismatchError as exc:
        raise _InvalidOutputError(
            f"the output {type(value).__qualname__} does not convert: {exc}"
        ) from None
    return Emitted(payload=payload, next=next_, headers=headers)


def _returned(value: Any, ctx: Context) -> Success:
    if value is None:
        return Success()
    return Success(outputs=(_emit(value, ctx),))


@dataclass(eq=False)
class _Job:
    future: concurrent.futures.Future[Any]
    func: Callable[..., Any]
    args: tuple[Any, ...]
    abandoned: bool = False


class _DaemonThreads:
    """Daemon threads for sync user code; a thread whose job was abandoned exits after it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._idle = 0
        self._count = 0
        self._lock = threading.Lock()
        self._by_future: dict[concurrent.futures.Future[Any], _Job] = {}
        self._closed = False
        self._running = 0

    def submit(self, func: Callable[..., R], *args: Any) -> concurrent.futures.Future[R]:
        future: concurrent.futures.Future[R] = concurrent.futures.Future()
        job = _Job(future, func, args)
        with self._lock:
            self._by_future[future] = job
            if self._idle == 0:
                self._count += 1
                threading.Thread(
                    target=self._work, name=f"{self._name}-{self._count}", daemon=True
                ).start()
            else:
                self._idle -= 1
        self._jobs.put(job)
        return future

    def abandon(self, future: concurrent.futures.Future[Any]) -> None:
        """Forget a running job: its thread exits when (if ever) the job returns."""
        with self._lock:
            job = self._by_future.pop(future, None)
        if job is not None:
            job.abandoned = True

    def _ended(self) -> None:
        with self._lock:
            self._running -= 1

    @property
    def running(self) -> int:
        """Jobs running now, abandoned ones included."""
        with self._lock:
            return self._running

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if job.future.set_running_or_notify_cancel():
                with self._lock:
                    self._running += 1
                # Counted out before its future is done: whoever awaits it sees it ended.
                try:
                    result = job.func(*job.args)
                except BaseException as exc:
                    self._ended()
                    job.future.set_exception(exc)
                else:
                    self._ended()
                    job.future.set_result(result)
            with self._lock:
                self._by_future.pop(job.future, None)
                if job.abandoned or self._closed:
                    return
                self._idle += 1
