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
import contextlib
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
        size = spec.concurrency if slots is None else slots
        # Async calls take turns at the gate; sync ones on the lane's threads, which start
        # each waiting call the moment the one before it returns. `_gate.closed` refuses both.
        self._gate = CallGate(size)
        self._on_abandon = on_abandon
        self._threads = _SyncLane(f"asya-{spec.name}", size)
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
                self._func = await self._on_thread(self.spec.target)
            except Exception as exc:
                raise ActorDefinitionError(
                    f"actor '{self.spec.name}': {self.spec.qualname}() raised {exc!r}",
                    actor=self.spec.name,
                ) from exc

    def drain(self) -> None:
        self._gate.turn_away()
        self._threads.turn_away()

    def refuse(self) -> None:
        """Start no call from now on: the waiting ones and every later one are `NotStarted`."""
        self._gate.close()
        self._threads.turn_away()

    async def aclose(self) -> None:
        """Start no more calls; a class actor's `close()`, if it has one, runs now (once),
        after an `__init__` in progress has returned."""
        self.refuse()
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
                    done = await self._on_thread(close)
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
        prepared: _Batch | list[tuple[tuple[Any, ...], Context] | Failure] = (
            self._prepare_batch(envelopes)
            if self.spec.batch is not None
            else [self._prepare_one(envelope) for envelope in envelopes]
        )
        if not self.spec.style.is_async:  # sync: the lane's threads take turns themselves
            if self._gate.closed:
                return [NotStarted()] * len(envelopes)
            return await self._invoke(prepared, None)
        if not await self._gate.enter():
            return [NotStarted()] * len(envelopes)
        turn = _Turn(self._gate)
        try:
            # The timeout counts from here: time spent waiting for a turn is not the call's.
            outcomes = await self._invoke(prepared, turn)
        finally:
            woke = turn.end()
        if woke:
            # The next call starts (on the device) before this one's outputs are checked,
            # encoded and sent: that work overlaps it instead of holding the device idle.
            await asyncio.sleep(0)
        return outcomes

    async def _invoke(
        self, prepared: _Batch | list[tuple[tuple[Any, ...], Context] | Failure], turn: _Turn | None
    ) -> list[Outcome]:
        if isinstance(prepared, _Batch):
            return await self._invoke_batch(prepared, turn)
        if len(prepared) == 1:
            return [await self._invoke_one(prepared[0])]
        return list(await asyncio.gather(*(self._invoke_one(c) for c in prepared)))

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

    async def _run(self, args: tuple[Any, ...], ctx: Context) -> Success | NotStarted:
        func = self._func
        assert func is not None
        style = self.spec.style
        if style is CallStyle.GENERATOR:
            # Emitted on the thread: a generator may set a different route before each yield.
            emitted = await self._call_sync(lambda: tuple(_emit(v, ctx) for v in func(*args)))
            if isinstance(emitted, NotStarted):
                return emitted
            return Success(outputs=emitted, fan_out=True)
        if style is CallStyle.RETURN:
            value = await self._call_sync(func, *args)
            return value if isinstance(value, NotStarted) else _returned(value, ctx)
        async with asyncio.timeout(self.spec.timeout_s):
            if style is CallStyle.ASYNC_RETURN:
                return _returned(await func(*args), ctx)
            return Success(outputs=tuple([_emit(v, ctx) async for v in func(*args)]), fan_out=True)

    async def _call_sync(self, func: Callable[..., R], *args: Any) -> R | NotStarted:
        """`func(*args)` on the lane, its timeout counted from when it starts; `NotStarted`
        if it was turned away (a drain, the invoker closing) before it started.

        Raises:
            TimeoutError: it ran past the actor's timeout (its thread is abandoned).
        """
        if self._gate.closed:
            return NotStarted()
        job = self._threads.submit(func, *args)
        if not await self._started(job, call=True):
            return NotStarted()
        async with asyncio.timeout(self.spec.timeout_s):
            result: R = await self._wait(job, call=True)
            return result

    async def _on_thread(self, func: Callable[..., Any]) -> Any:
        """`func()` on the lane with no limit of its own: a class's `__init__` and `close()`."""
        job = self._threads.submit(func)
        if not await self._started(job, call=False):
            raise ActorDefinitionError(
                f"actor '{self.spec.name}': closed before {self.spec.qualname} could run",
                actor=self.spec.name,
            )
        return await self._wait(job, call=False)

    async def _started(self, job: _Job, *, call: bool) -> bool:
        """Whether `job` started (False: it was turned away). A caller that gives up takes its
        job back if it has not started, and leaves it running (`_abandoned`) if it has."""
        try:
            return await job.started
        except asyncio.CancelledError:
            if not self._threads.withdraw(job):
                self._abandoned(job, call=call)
            raise

    async def _wait(self, job: _Job, *, call: bool) -> Any:
        try:
            return await job.done
        except asyncio.CancelledError:
            self._abandoned(job, call=call)
            raise

    def _abandoned(self, job: _Job, *, call: bool) -> None:
        """A job that ran past its timeout, or whose caller gave up: its thread is left to
        finish (it cannot be stopped). A call's place goes to the next call, unless this is a
        worker process (`on_abandon`): it leaves, so it starts nothing more, and turns the
        waiting calls away in the same step, before any could start (they go back)."""
        leaving = call and self._on_abandon is not None
        if not self._threads.abandon(job, turn_away=leaving):
            return  # it had finished, or never began
        if not call:
            log.warning(
                "a class's __init__ or close() was left running on its thread",
                extra={"actor": self.spec.name},
            )
            return
        fields = {"actor": self.spec.name, "timeout_s": self.spec.timeout_s}
        if self._on_abandon is not None:  # a worker process: it leaves, and the call with it
            log.warning("handler ran past its timeout; the worker exits", extra=fields)
            self._gate.close()
            self._on_abandon()
        else:
            log.warning(
                "handler still running past its timeout: its thread cannot be stopped"
                " and is left to finish (it ends with the process at the latest); run"
                " with --isolate, or under asya serve, to have such a call killed",
                extra=fields,
            )

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

    async def _invoke_batch(self, batch: _Batch, turn: _Turn | None) -> list[Outcome]:
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
        self, args: tuple[Any, ...], ctxs: list[Context], turn: _Turn | None
    ) -> list[Outcome]:
        func = self._func
        assert func is not None
        try:
            if turn is None:  # sync: the lane starts the next call as this one returns
                results = await self._call_sync(func, *args)
                if isinstance(results, NotStarted):
                    return [NotStarted()] * len(ctxs)
            else:
                async with asyncio.timeout(self.spec.timeout_s):
                    results = await func(*args)
        except TimeoutError:
            return [timeout_failure(self.spec)] * len(ctxs)
        except Exception as exc:
            return [exception_failure(self.spec, exc)] * len(ctxs)
        if turn is not None and turn.end():  # the next call starts while these are converted
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


class _Job:
    """One piece of sync user code for `_SyncLane`, with the loop-side futures it settles."""

    __slots__ = ("abandoned", "args", "began", "done", "finished", "func", "loop", "started")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, func: Callable[..., Any], args: tuple[Any, ...]
    ):
        self.loop = loop
        self.func = func
        self.args = args
        self.started: asyncio.Future[bool] = loop.create_future()
        """True once a thread began it; False if it was turned away first."""
        self.done: asyncio.Future[Any] = loop.create_future()
        # Under the lane's lock: a thread took it / it returned / it was left running.
        self.began = False
        self.finished = False
        self.abandoned = False


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # the awaiting side gave up (timeout, cancelled)
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


def _tell(job: _Job, future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """Settle `future` on its loop, from a lane thread; nothing if the loop has closed (an
    abandoned call that ended after its process stopped serving)."""
    with contextlib.suppress(RuntimeError):
        job.loop.call_soon_threadsafe(_settle, future, value, error)


class _SyncLane:
    """Daemon threads for sync user code: at most `slots` calls run at once, the others wait
    here and start in the order they came, each on the thread that ended the call before it.

    A call that ends starts the next one on its own thread, with no round trip through the
    event loop in between: the loop learns of both afterwards. Between two calls of a busy
    worker the device its handler drives waits for none of the loop's work (nor for a thread
    to wake). A thread whose call was abandoned (past its timeout) exits after it, and its
    place goes at once to the next call, on a new thread."""

    def __init__(self, name: str, slots: int) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._waiting: collections.deque[_Job] = collections.deque()
        self._free = slots
        self._idle = 0
        self._handoff: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._count = 0
        self._running = 0
        self._closed = False

    def submit(self, func: Callable[..., R], *args: Any) -> _Job:
        """Start `func(*args)` on a thread when a place is free; await `job.started`, then
        `job.done`."""
        job = _Job(asyncio.get_running_loop(), func, args)
        with self._lock:
            if self._closed:
                job.started.set_result(False)
                return job
            if self._free == 0:
                self._waiting.append(job)
                return job
            self._free -= 1
            self._running += 1
            job.began = True
            if self._idle:
                self._idle -= 1
                self._handoff.put(job)
                return job
        self._thread(job)
        return job

    def withdraw(self, job: _Job) -> bool:
        """Take back a call that has not begun (True: waiting, or turned away already); False
        once a thread took it."""
        with self._lock:
            if job.began:
                return False
            with contextlib.suppress(ValueError):
                self._waiting.remove(job)
        _settle(job.started, False, None)  # a cancelled caller's is done already
        return True

    def turn_away(self) -> None:
        """The waiting calls do not start (`job.started` is False); running ones go on."""
        with self._lock:
            waiting, self._waiting = self._waiting, collections.deque()
        for job in waiting:
            _settle(job.started, False, None)

    def abandon(self, job: _Job, *, turn_away: bool = False) -> bool:
        """Leave a running call to finish on its own (its thread exits after it) and give its
        place to the next call, or, with `turn_away`, turn every waiting call away in the same
        step; False if it had not begun or had already finished."""
        turned: collections.deque[_Job] = collections.deque()
        with self._lock:
            if not job.began or job.finished or job.abandoned:
                return False
            job.abandoned = True
            if turn_away:
                turned, self._waiting = self._waiting, collections.deque()
            following = self._pass_place()
        for waiting in turned:
            _settle(waiting.started, False, None)
        if following is not None:
            self._thread(following)
        return True

    @property
    def running(self) -> int:
        """Calls running now, abandoned ones included."""
        with self._lock:
            return self._running

    def close(self) -> None:
        """Start nothing more: waiting calls are turned away; idle threads exit."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        self.turn_away()
        for _ in range(idle):
            self._handoff.put(None)

    def _pass_place(self) -> _Job | None:
        """A place came free (under the lock): the first waiting call begins on it, for its
        caller to start; or, with none waiting or the lane closed, it is given back."""
        if self._closed or not self._waiting:
            self._free += 1
            return None
        job = self._waiting.popleft()
        job.began = True
        self._running += 1
        return job

    def _thread(self, job: _Job) -> None:
        """Start a thread on `job`, which holds a place; if none can start, the job fails to
        start (its caller gets the error) and its place goes to the next waiting call, if one
        came meanwhile (nothing else would start it), or is given back."""
        following: _Job | None = job
        while following is not None:
            job = following
            self._count += 1  # names only: a race here costs a duplicate name, nothing else
            thread = threading.Thread(
                target=self._work, args=(job,), name=f"{self._name}-{self._count}", daemon=True
            )
            try:
                thread.start()
                return
            except RuntimeError as exc:  # "can't start new thread"
                with self._lock:
                    job.finished = True  # never ran: not to be abandoned (a second free place)
                    self._running -= 1
                    following = self._pass_place()
                _settle(job.started, None, exc)

    def _work(self, job: _Job | None) -> None:
        while job is not None:
            _tell(job, job.started, True, None)
            value: Any = None
            error: BaseException | None = None
            try:
                value = job.func(*job.args)
            except StopIteration as exc:  # a future cannot hold it: asyncio refuses it
                error = RuntimeError(f"the handler raised StopIteration: {exc!r}")
                error.__cause__ = exc
            except BaseException as exc:
                error = exc
            with self._lock:
                # Counted out before its future is done: whoever awaits it sees it ended.
                job.finished = True
                self._running -= 1
                following, idle = None, False
                if not job.abandoned:  # an abandoned call's place went on when it was abandoned
                    following = self._pass_place()
                    idle = following is None and not self._closed
                    if idle:
                        self._idle += 1
            _tell(job, job.done, value, error)
            del value, error
            if job.abandoned:
                return
            job = following if following is not None else (self._handoff.get() if idle else None)
