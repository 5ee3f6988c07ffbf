"""`@actor`: declare a function or class as an actor, and the registry that remembers it.

`@actor` inspects the target once (sync or async, generator or not, class or function, whether
it takes a `Context` — a batch handler, one per payload — and whether its payload is declared as
a model class, `asya.payload_types`), checks the options, records an `ActorSpec` in the
registry and returns the target unchanged, so decorated code stays plain Python that tests can
call directly. It does nothing else: no broker, no environment, no thread. The registry is the
only global state in asya; `asya.handler` turns a spec into something callable, `asya.local`
runs specs.

Each option's name, type, bound and default is written once, as a field of `ActorOptions`:
`@actor` validates its keywords against that Struct, `ActorSpec` extends it with what inspecting
the target found, and the shapes other code reads are cut from it by field name: `ActorConfig`
(what crosses the runtime socket), `Scaling` and `Resources`. `ActorKeywords` repeats the names
and types for type checkers only, and a test holds it equal to `ActorOptions`.
"""

from __future__ import annotations

import collections.abc
import difflib
import enum
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Final, TypedDict, TypeVar, Unpack, overload

import msgspec

from asya import typeinfo
from asya.context import Context
from asya.errors import ActorDefinitionError
from asya.payload_types import PayloadType, model_kind, payload_type_of
from asya.retry import RetryPolicy, RetrySchedule, retry_option_hint
from asya.routing import kebab_case, route_name_problem

T = TypeVar("T")
_View = TypeVar("_View", bound=msgspec.Struct)

SPEC_ATTRIBUTE: Final = "__asya_actor__"
"""Attribute `@actor` sets on its target, so a handler reference finds its spec."""


class CallStyle(enum.Enum):
    """How the handler produces its result."""

    RETURN = "return"
    ASYNC_RETURN = "async-return"
    GENERATOR = "generator"
    ASYNC_GENERATOR = "async-generator"

    @property
    def is_async(self) -> bool:
        return self in (CallStyle.ASYNC_RETURN, CallStyle.ASYNC_GENERATOR)

    @property
    def is_generator(self) -> bool:
        return self in (CallStyle.GENERATOR, CallStyle.ASYNC_GENERATOR)


_Positive = Annotated[int, msgspec.Meta(ge=1)]
_NonNegative = Annotated[int, msgspec.Meta(ge=0)]
_PositiveSeconds = Annotated[float, msgspec.Meta(gt=0)]
_Quantity = Annotated[str, msgspec.Meta(pattern=r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")]


class _ChainOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The options the message chain runs an actor with: `ActorOptions` and `ActorConfig` both
    inherit them, so the wire form takes its fields and defaults from here."""

    timeout_s: _PositiveSeconds = 300.0
    """Longest a call may run, in seconds."""
    concurrency: _Positive = 1
    """Calls in flight per worker."""
    batch: _Positive | None = None
    """Payloads per call for a batch handler; None: one payload per call."""
    batch_wait_ms: _NonNegative = 10
    """Longest a batch waits to fill before it is called anyway, in milliseconds."""


class ActorOptions(_ChainOptions, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The options `@actor(...)` takes, each with its type, bound and default.

    Built by `msgspec.convert` from the decorator's keywords, which checks the bounds; a
    direct construction does not check them.
    """

    name: str | None = None
    """Actor name, also its queue name (DNS-1123); None: the target's name in kebab-case."""
    retry: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    """Which failures are tried again, how often, and after how long."""
    min_replicas: _NonNegative = 0
    """Replicas kept when the queue is empty; 0 lets the actor scale to zero."""
    max_replicas: _Positive = 10
    """Most replicas the actor may scale to."""
    queue_length: _Positive = 5
    """Messages (ready plus unacked) one replica is expected to handle."""
    activation: _NonNegative = 0
    """Queue depth above which an actor at zero replicas is started."""
    cooldown_s: Annotated[float, msgspec.Meta(ge=0)] = 300.0
    """Seconds of an idle queue before scaling back to `min_replicas`."""
    polling_interval_s: _PositiveSeconds = 30.0
    """Seconds between queue-depth checks on Kubernetes (the local runner polls faster)."""
    cpu: _Quantity | None = None
    """CPU request per replica in Kubernetes notation (`500m`, `2`)."""
    memory: _Quantity | None = None
    """Memory request per replica in Kubernetes notation (`512Mi`, `16Gi`)."""
    gpus: _NonNegative = 0
    """Whole GPUs per replica (`nvidia.com/gpu`)."""
    pool: str | None = None
    """The ResourcePool whose quota admits the actor's replicas on Kubernetes."""
    priority: int = 0
    """The actor's priority within its pool."""
    cpu_fallback: bool = False
    """A GPU actor's worker that finds no GPU free runs on CPU (no GPU visible to it) instead of
    waiting for one; the local runner's choice (`asya dev`, `asya serve`), not the cluster's."""

    @property
    def scaling(self) -> Scaling:
        """Replica bounds and the queue-depth rule."""
        return _view(self, Scaling)

    @property
    def resources(self) -> Resources:
        """What one replica asks the cluster for."""
        return _view(self, Resources)


class Scaling(msgspec.Struct, frozen=True, kw_only=True):
    """Replica bounds and the queue-depth rule of KEDA's RabbitMQ scaler: `ActorOptions`' fields
    of those names, documented and defaulted there."""

    min_replicas: int
    max_replicas: int
    queue_length: int
    activation: int
    cooldown_s: float
    polling_interval_s: float


class Resources(msgspec.Struct, frozen=True, kw_only=True):
    """What one replica asks the cluster for: `ActorOptions`' fields of those names."""

    cpu: str | None
    memory: str | None
    gpus: int


class ActorConfig(_ChainOptions, frozen=True, kw_only=True):
    """The options the message chain needs to run an actor: what the sidecar learns from the
    runtime (one Struct across the socket) and the local runner takes from the spec."""

    name: str
    retry: RetrySchedule = msgspec.field(default_factory=lambda: RetryPolicy().schedule)
    """The retry policy's attempts and delays; its exception types stay with the worker."""


def _view(options: ActorOptions, kind: type[_View], **given: Any) -> _View:
    """`kind` holding `options`' fields of the same names, and `given` for the rest."""
    picked = {name: getattr(options, name) for name in kind.__struct_fields__ if name not in given}
    return kind(**picked, **given)


class ActorSpec(ActorOptions, frozen=True, kw_only=True):
    """Everything asya knows about one actor, fixed at decoration time: its options (the name
    now decided) and what inspecting the target found."""

    name: str
    target: Callable[..., Any]
    module: str
    qualname: str
    is_class: bool
    style: CallStyle
    takes_context: bool
    """Called with its `Context` after the payload; a batch handler, with a list of them (one
    per payload, in the same order)."""
    payload_type: PayloadType | None
    """The model class the payload (for a batch handler, each item) is converted to; None: the
    payload as decoded from JSON."""

    @property
    def config(self) -> ActorConfig:
        """The options the message chain runs this actor with."""
        return _view(self, ActorConfig, retry=self.retry.schedule)

    @property
    def ref(self) -> str:
        """`module:qualname`, the form `ASYA_HANDLER` takes."""
        return f"{self.module}:{self.qualname}"


class ActorKeywords(TypedDict, total=False):
    """The keywords `@actor(...)` takes, for type checkers: `ActorOptions`' fields, names and
    types only (documented and defaulted there; a test holds the two equal)."""

    name: str | None
    concurrency: int
    timeout_s: float
    retry: RetryPolicy
    batch: int | None
    batch_wait_ms: int
    min_replicas: int
    max_replicas: int
    queue_length: int
    activation: int
    cooldown_s: float
    polling_interval_s: float
    cpu: str | None
    memory: str | None
    gpus: int
    pool: str | None
    priority: int
    cpu_fallback: bool


_OPTION_NAMES: Final = frozenset(ActorOptions.__struct_fields__)


class Registry:
    """Actors declared so far, by name. One per process; tests make their own."""

    def __init__(self) -> None:
        self._specs: dict[str, ActorSpec] = {}

    def add(self, spec: ActorSpec) -> None:
        """Record `spec`; a second actor under the same name is an error, a re-import is not.

        Raises:
            ActorDefinitionError: another target already uses this actor name.
        """
        known = self._specs.get(spec.name)
        if known is not None and known.ref != spec.ref:
            raise ActorDefinitionError(
                f"actor name '{spec.name}' is used by both {known.ref} and {spec.ref};"
                " pass name=... to one of them",
                actor=spec.name,
            )
        self._specs[spec.name] = spec

    def get(self, name: str) -> ActorSpec | None:
        return self._specs.get(name)

    def __iter__(self) -> Iterator[ActorSpec]:
        return iter(list(self._specs.values()))

    def __len__(self) -> int:
        return len(self._specs)

    def clear(self) -> None:
        self._specs.clear()


REGISTRY: Final = Registry()
"""The process-wide registry `@actor` writes to."""


@overload
def actor(target: T, /) -> T: ...
@overload
def actor(**options: Unpack[ActorKeywords]) -> Callable[[T], T]: ...
def actor(target: Any = None, /, **options: Unpack[ActorKeywords]) -> Any:
    """Declare a function or class as an actor; returns it unchanged.

    Use bare (`@actor`) or with options (`@actor(gpus=1, batch=32)`).

    Raises:
        ActorDefinitionError: an unknown or invalid option, or a target that cannot be a handler.
    """

    def decorate(obj: T) -> T:
        spec = build_spec(obj, options)
        REGISTRY.add(spec)
        setattr(obj, SPEC_ATTRIBUTE, spec)
        return obj

    if target is None:
        return decorate
    return decorate(target)


def spec_of(obj: object) -> ActorSpec | None:
    """The spec `@actor` attached to `obj`, if any."""
    spec = getattr(obj, SPEC_ATTRIBUTE, None)
    return spec if isinstance(spec, ActorSpec) else None


def default_actor_name(obj: object) -> str:
    """`clean_text` -> `clean-text`; `SentimentScorer` -> `sentiment-scorer`."""
    return kebab_case(getattr(obj, "__name__", type(obj).__name__))


def build_spec(obj: Any, options: Mapping[str, Any]) -> ActorSpec:
    """Inspect `obj` and check `options`; the work `@actor` does before registering.

    Raises:
        ActorDefinitionError: as for `actor`.
    """
    label = getattr(obj, "__qualname__", repr(obj))
    checked = _check_options(options, label)
    name = checked.name or default_actor_name(obj)
    problem = route_name_problem(name)
    if problem is not None:
        raise ActorDefinitionError(f"@actor on {label}: {problem}", actor=name)
    if checked.min_replicas > checked.max_replicas:
        raise ActorDefinitionError(
            f"@actor '{name}': min_replicas ({checked.min_replicas}) is above max_replicas"
            f" ({checked.max_replicas})",
            actor=name,
        )
    if checked.cpu_fallback and checked.gpus == 0:
        raise ActorDefinitionError(
            f"@actor '{name}': cpu_fallback=True applies to GPU actors only; declare gpus=N"
            " too, or drop cpu_fallback",
            actor=name,
        )
    is_batch = checked.batch is not None
    is_class, func, skip = _inspect_target(obj, name)
    style = _call_style(func)
    if is_batch and style.is_generator:
        raise ActorDefinitionError(
            f"@actor '{name}': a batch handler takes a list of payloads and returns a list of"
            " the same length; it cannot be a generator",
            actor=name,
        )
    takes_context, payload_type = _inspect_parameters(func, skip, name, is_batch=is_batch)
    return ActorSpec(
        **(msgspec.structs.asdict(checked) | {"name": name}),
        target=obj,
        module=obj.__module__,
        qualname=obj.__qualname__,
        is_class=is_class,
        style=style,
        takes_context=takes_context,
        payload_type=payload_type,
    )


def _check_options(raw: Mapping[str, Any], label: str) -> ActorOptions:
    _reject_unknown(raw, label)
    # Checked before the conversion, which would build a RetryPolicy out of a dict: only code
    # can name the exception types, so a policy is always written as one.
    if "retry" in raw and not isinstance(raw["retry"], RetryPolicy):
        raise ActorDefinitionError(
            f"@actor on {label}: retry must be an asya.retry.RetryPolicy, got {raw['retry']!r}"
        )
    try:
        return typeinfo.convert(dict(raw), ActorOptions)
    except msgspec.ValidationError as exc:
        raise ActorDefinitionError(f"@actor on {label}: invalid option: {exc}") from exc


def _reject_unknown(raw: Mapping[str, Any], label: str) -> None:
    for key, value in raw.items():
        if key not in _OPTION_NAMES:
            retry = retry_option_hint(key, value)
            if retry is not None:
                raise ActorDefinitionError(f"@actor on {label}: unknown option '{key}'; {retry}")
            close = difflib.get_close_matches(key, sorted(_OPTION_NAMES), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            valid = ", ".join(sorted(_OPTION_NAMES))
            raise ActorDefinitionError(
                f"@actor on {label}: unknown option '{key}'{hint} (valid options: {valid})"
            )


def _inspect_target(obj: Any, name: str) -> tuple[bool, Callable[..., Any], int]:
    """(is it a class, the function asya calls, how many leading parameters asya does not
    pass: `self`)."""
    if inspect.isclass(obj):
        func = next((vars(k)["__call__"] for k in obj.__mro__[:-1] if "__call__" in vars(k)), None)
        if not inspect.isfunction(func):
            raise ActorDefinitionError(
                f"@actor '{name}': class {obj.__qualname__} needs a __call__(self, payload)"
                " method: __init__ runs once per worker, __call__ once per envelope",
                actor=name,
            )
        _require_no_arg_init(obj, name)
        _require_no_arg_close(obj, name)
        skip = 1
    elif callable(obj) and (inspect.isfunction(obj) or inspect.ismethod(obj)):
        func = obj
        skip = 0
    else:
        raise ActorDefinitionError(
            f"@actor '{name}': expected a function or a class, got {type(obj).__name__}",
            actor=name,
        )
    return inspect.isclass(obj), func, skip


def _require_no_arg_init(cls: type, name: str) -> None:
    required = _required_parameters(cls, skip=0)
    if required:
        raise ActorDefinitionError(
            f"@actor '{name}': {cls.__qualname__}() must be constructible without arguments"
            f" (it requires {', '.join(required)}); read configuration inside __init__",
            actor=name,
        )


def _require_no_arg_close(cls: type, name: str) -> None:
    close = inspect.getattr_static(cls, "close", None)
    if close is None:
        return
    if isinstance(close, staticmethod):
        func, skip = close.__func__, 0
    elif isinstance(close, classmethod):
        func, skip = close.__func__, 1
    elif inspect.isfunction(close):
        func, skip = close, 1
    else:
        raise ActorDefinitionError(
            f"@actor '{name}': {cls.__qualname__}.close must be a method, close(self), which"
            " asya calls once when the worker stops",
            actor=name,
        )
    required = _required_parameters(func, skip=skip)
    if required:
        raise ActorDefinitionError(
            f"@actor '{name}': {cls.__qualname__}.close() is called with no arguments when the"
            f" worker stops (it requires {', '.join(required)})",
            actor=name,
        )


def _required_parameters(func: Callable[..., Any], *, skip: int) -> list[str]:
    """The names of the parameters of `func` a call without arguments would lack, past the
    first `skip` (`self`, `cls`)."""
    params = list(inspect.signature(func).parameters.values())[skip:]
    return [p.name for p in params if p.default is p.empty and p.kind in _POSITIONAL_OR_KW]


_POSITIONAL_OR_KW: Final = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)


def _call_style(func: Callable[..., Any]) -> CallStyle:
    if inspect.isasyncgenfunction(func):
        return CallStyle.ASYNC_GENERATOR
    if inspect.iscoroutinefunction(func):
        return CallStyle.ASYNC_RETURN
    if inspect.isgeneratorfunction(func):
        return CallStyle.GENERATOR
    return CallStyle.RETURN


CONTEXT_PARAMETER_NAMES: Final = ("ctx", "context")
"""Names that make an unannotated second parameter the handler's `Context`."""

BATCH_CONTEXT_PARAMETER_NAMES: Final = ("ctxs", "contexts", *CONTEXT_PARAMETER_NAMES)
"""Names that make an unannotated second parameter a batch handler's list of contexts."""

_CONTEXT_SPELLINGS: Final = frozenset({"Context", "asya.Context", "asya.context.Context"})
_CONTEXT_LIST_SPELLING: Final = re.compile(
    r"^(list|List|typing\.List|Sequence|typing\.Sequence|collections\.abc\.Sequence)"
    r"\[(Context|asya\.Context|asya\.context\.Context)\]$"
)
_SEQUENCES: Final = (list, collections.abc.Sequence)
_POSITIONAL: Final = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_CONVENTIONS: Final = (
    "a handler takes (payload) or (payload, ctx), a class __call__(self, payload[, ctx]), a batch"
    " handler (payloads[, ctxs]); the Context parameter is annotated Context (a batch handler's:"
    " list[Context]) or named ctx or context (a batch handler's also ctxs or contexts), and any"
    " other parameter needs a default"
)


def _inspect_parameters(
    func: Callable[..., Any], skip: int, name: str, *, is_batch: bool
) -> tuple[bool, PayloadType | None]:
    """(whether the handler is called with its Context — a batch handler, a list of them — and
    the model its payload is declared as); any shape asya cannot call is refused."""
    params = list(inspect.signature(func).parameters.values())[skip:]
    if not params or params[0].kind not in _POSITIONAL:
        raise _signature_error(name, "the payload must be the first positional parameter")
    payload, *rest = params
    payload_annotation = _annotation(func, payload)
    if _is_context(payload_annotation) or _is_context_list(payload_annotation):
        raise _signature_error(name, f"'{payload.name}' is annotated Context but takes the payload")
    payload_type = _payload_type(payload_annotation, payload.name, name, is_batch=is_batch)
    takes_context = False
    for position, param in enumerate(rest):
        is_context, annotation = _is_context_parameter(func, param, name, is_batch=is_batch)
        if is_context and position == 0 and param.kind in _POSITIONAL:
            takes_context = True
        elif is_context:
            raise _signature_error(
                name, f"Context parameter '{param.name}' must be the second positional parameter"
            )
        elif param.default is param.empty and param.kind not in _VARIADIC:
            unresolved = f" (its annotation {annotation!r} did not resolve)"
            raise _signature_error(
                name,
                f"parameter '{param.name}' has no default and is not a Context"
                + (unresolved if isinstance(annotation, str) else ""),
            )
    return takes_context, payload_type


def _is_context_parameter(
    func: Callable[..., Any], param: inspect.Parameter, name: str, *, is_batch: bool
) -> tuple[bool, Any]:
    """(whether `param` is the Context parameter — a batch handler's: the list of them — and its
    annotation); a Context where a list is due, or the other way round, is refused."""
    annotation = _annotation(func, param)
    if is_batch and _is_context(annotation):
        raise _signature_error(
            name,
            f"a batch handler gets one Context per payload: annotate '{param.name}' list[Context]",
        )
    if not is_batch and _is_context_list(annotation):
        raise _signature_error(
            name,
            f"'{param.name}' is annotated list[Context], which only a batch handler takes:"
            " declare @actor(batch=N), or annotate it Context",
        )
    if _is_context_list(annotation) if is_batch else _is_context(annotation):
        return True, annotation
    names = BATCH_CONTEXT_PARAMETER_NAMES if is_batch else CONTEXT_PARAMETER_NAMES
    unannotated = annotation is param.empty or isinstance(annotation, str)
    return param.name in names and unannotated, annotation


def _payload_type(
    annotation: Any, parameter: str, name: str, *, is_batch: bool
) -> PayloadType | None:
    """The model the payload is converted to: the annotation itself, or for a batch handler the
    item type of its `list[...]` annotation."""
    if not is_batch:
        return payload_type_of(annotation)
    if model_kind(annotation) is not None:
        raise _signature_error(
            name,
            f"'{parameter}' is annotated {annotation.__qualname__}, but a batch handler takes a"
            f" list of payloads: annotate it list[{annotation.__qualname__}]",
        )
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in _SEQUENCES and len(args) == 1:
        return payload_type_of(args[0])
    return None


_VARIADIC: Final = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _signature_error(name: str, problem: str) -> ActorDefinitionError:
    return ActorDefinitionError(f"@actor '{name}': {problem}; {_CONVENTIONS}", actor=name)


def _annotation(func: Callable[..., Any], param: inspect.Parameter) -> Any:
    """The parameter's annotation, evaluated where it is a string (`from __future__ import
    annotations`); one that does not evaluate (a name imported under TYPE_CHECKING) stays a
    string. Evaluated one parameter at a time, so another unresolvable one cannot hide it."""
    annotation = param.annotation
    if not isinstance(annotation, str) or annotation in _CONTEXT_SPELLINGS:
        return annotation
    try:
        return eval(annotation, getattr(func, "__globals__", {}))
    except Exception:  # user code: any error means "unresolved", as for typing.get_type_hints
        return annotation


def _is_context(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation in _CONTEXT_SPELLINGS
    if isinstance(annotation, type):
        return issubclass(annotation, Context)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _is_context(args[0])
    # `ctx: Context | None = None` is a Context too; `list[Context]` is not.
    return origin in (typing.Union, types.UnionType) and any(_is_context(a) for a in args)


def _is_context_list(annotation: Any) -> bool:
    """`list[Context]` (or a Sequence of them): a batch handler's contexts."""
    if isinstance(annotation, str):
        return _CONTEXT_LIST_SPELLING.match(annotation.replace(" ", "")) is not None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _is_context_list(args[0])
    if origin in _SEQUENCES:
        return len(args) == 1 and _is_context(args[0])
    return origin in (typing.Union, types.UnionType) and any(_is_context_list(a) for a in args)
