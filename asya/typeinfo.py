"""msgspec's decoding of typed values, safe from any thread: every typed decode in asya is here.

msgspec builds a type's decoding info the first time it decodes into that type, and caches it
on the type (a Struct's `struct_info`, a dataclass's `__msgspec_cache__`) *before* it has
filled in the fields' types, so that recursive types work. It calls back into Python while it
fills them in (to evaluate the nested types' annotations), and another thread that decodes into
the same type meanwhile finds the half-built info and dereferences an empty field: the process
segfaults (msgspec 0.18.6 to 0.22.0, with the GIL; 0.23.0 mends it, and the lock stays while
pyproject.toml allows older releases). The operator decodes its custom resources
on the event loop and on `asyncio.to_thread` workers, the runtime its payload models on handler
threads, so the first decode of a type must be made whole on one thread before any other starts.

`prepare` does that, once per type, under one lock; `convert` and `decode_json` prepare the type,
then decode as msgspec does. Decoders built at import (`msgspec.json.Decoder(T)` at module
level) need nothing: the import lock already makes that one thread. Untyped decodes build no
info. Encoding reads no such info.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

import msgspec

T = TypeVar("T")

_prepared: set[Any] = set()
_preparing: Final = threading.RLock()


def prepare(*types: Any) -> None:
    """Build msgspec's decoding info for `types` (and every type inside them) on this thread,
    unless that was done already; a thread that asks meanwhile waits for it to be whole.

    Raises:
        TypeError, NameError: a type msgspec cannot decode into (an annotation that does not
            resolve): the same error the decode itself would raise.
    """
    for type_ in types:
        if type_ in _prepared:  # a set lookup: atomic under the GIL, and the common case
            continue
        with _preparing:
            if type_ not in _prepared:
                msgspec.json.Decoder(type_)  # builds and caches the info, whole, before it returns
                _prepared.add(type_)


def convert(
    obj: Any,
    type: type[T],
    *,
    strict: bool = True,
    dec_hook: Callable[[type, Any], Any] | None = None,
) -> T:
    """`msgspec.convert(obj, type, …)` with `type` prepared first.

    Raises:
        msgspec.ValidationError: `obj` does not fit `type`; the message names the path.
    """
    prepare(type)
    return msgspec.convert(obj, type, strict=strict, dec_hook=dec_hook)


def decode_json(data: bytes | str, type: type[T]) -> T:
    """`msgspec.json.decode(data, type=type)` with `type` prepared first.

    Raises:
        msgspec.DecodeError: `data` is not JSON, or does not fit `type` (a ValidationError).
    """
    prepare(type)
    return msgspec.json.decode(data, type=type)
