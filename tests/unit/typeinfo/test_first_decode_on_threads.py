"""Two threads decoding into a type msgspec has not seen yet: the bare pattern segfaults (msgspec
0.18.6 to 0.22.0; 0.23.0 mends it), `asya.typeinfo` does not. Each run is a fresh interpreter:
the crash needs a type whose decoding info is being built for the first time, and kills the
process it is in."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import msgspec

# Made deterministic: building `Outer`'s info caches it half-built, then evaluates `Inner`'s
# annotations, where `_gate` stops that thread until the second thread has decoded (or died
# trying). The second thread then meets exactly the half-built info the race lets it meet.
_PATTERN = textwrap.dedent(
    """
    from __future__ import annotations
    import threading
    import msgspec
    from asya import typeinfo

    building, second_done = threading.Event(), threading.Event()

    def _gate(annotation):
        building.set()
        second_done.wait(timeout=1.0)  # with prepare(), the second thread waits for us instead
        return annotation

    class Inner(msgspec.Struct, kw_only=True):
        a: _gate(int) = 0

    class Outer(msgspec.Struct, kw_only=True):
        n: int = 0
        inner: Inner | None = None

    body = {"n": 1, "inner": {"a": 2}}
    decode = {decode}

    def second():
        building.wait()
        decode(body, Outer)
        second_done.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert decode(body, Outer) == Outer(n=1, inner=Inner(a=2))
    thread.join()
    """
)


def _run(decode: str) -> subprocess.CompletedProcess[str]:
    script = _PATTERN.replace("{decode}", decode)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False
    )


def test_two_threads_decoding_a_new_type_through_typeinfo_both_get_it():
    # When: the second thread decodes while the first is building the type's info
    done = _run("typeinfo.convert")

    # Then
    assert done.returncode == 0, done.stderr


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


# The first release whose bare pattern survives (checked by the test below, either way).
_MENDED_IN = (0, 23, 0)


def test_the_bare_msgspec_pattern_crashes_exactly_where_msgspec_is_known_to():
    # A canary: asya.typeinfo's lock may go once pyproject.toml requires a mended msgspec.
    # Given
    mended = _version(msgspec.__version__) >= _MENDED_IN

    # When
    done = _run("msgspec.convert")

    # Then
    if mended:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == -signal.SIGSEGV, done.stderr
