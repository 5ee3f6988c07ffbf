"""Raw bytes and odd encodings fed straight into an actor's queue.

Whatever is not an envelope is recorded at `error-end` as `MalformedEnvelope` with a record of
its body (known here by its sha256); what is an envelope in spite of its odd shape goes on.
"""

from __future__ import annotations

import gzip
import json
import random

import msgspec

from tests.hostile.accounting import (
    HAPPY,
    Hostile,
    envelope_fields,
    json_body,
    new_id,
    raw,
    valid,
)


def _text_envelope(label: str, text: str = "café ☕") -> tuple[str, str]:
    envelope_id = new_id(label)
    body = envelope_fields(envelope_id, "echo", {"text": text})
    return envelope_id, json.dumps(body, ensure_ascii=False)


def garbage() -> list[Hostile]:
    rng = random.Random(20240611)
    noise = [raw(f"random {n} bytes", rng.randbytes(n)) for n in (1, 7, 64, 1000, 4096, 65_537)]
    literal = [
        raw("empty body", b""),
        raw("a NUL byte", b"\x00"),
        raw("1000 NUL bytes", b"\x00" * 1000),
        raw("whitespace only", b" \n\t\r "),
        raw("JSON null", b"null"),
        raw("JSON true", b"true"),
        raw("JSON number", b"42"),
        raw("JSON string", b'"an envelope"'),
        raw("JSON array", b'[{"id": "x", "route": {"curr": "echo"}}]'),
        raw("empty object", b"{}"),
        raw("unclosed object", b'{"id": "x", "route": {"curr": "echo"'),
        raw("a lone brace", b"}"),
        raw("XML", b"<envelope><id>x</id></envelope>"),
        raw("a Python repr", b"{'id': 'x', 'route': {'curr': 'echo'}}"),
        raw("NaN in the payload", b'{"id": "nan-1", "route": {"curr": "echo"}, "payload": NaN}'),
        raw("Infinity", b'{"id": "inf-1", "route": {"curr": "echo"}, "payload": Infinity}'),
        raw("trailing garbage", b'{"id": "tg-1", "route": {"curr": "echo"}} trailing'),
        raw("two envelopes", b'{"id": "a-1", "route": {"curr": "echo"}}{"id": "a-2"}'),
        raw("a comment", b'{"id": "c-1", /* hi */ "route": {"curr": "echo"}}'),
        raw("single quotes", b"{'id': 'q-1'}"),
    ]
    return noise + literal


def encodings() -> list[Hostile]:
    items = []
    for label, codec in (
        ("UTF-16 with BOM", "utf-16"),
        ("UTF-16-BE", "utf-16-be"),
        ("UTF-32", "utf-32"),
        ("latin-1 with an e-acute", "latin-1"),
        ("cp1252 with a euro sign", "cp1252"),
    ):
        _, text = _text_envelope(label, "café €" if codec == "cp1252" else "café")
        items.append(raw(label, text.encode(codec)))
    _, text = _text_envelope("UTF-8 BOM")
    items.append(raw("UTF-8 BOM", b"\xef\xbb\xbf" + text.encode()))
    _, text = _text_envelope("invalid UTF-8", "INVALID")
    items.append(raw("invalid UTF-8 in a string", text.encode().replace(b"INVALID", b"\xc3\x28")))
    _, text = _text_envelope("overlong UTF-8", "SLASH")
    items.append(raw("an overlong UTF-8 slash", text.encode().replace(b"SLASH", b"\xc0\xaf")))
    _, text = _text_envelope("raw NUL", "NUL")
    items.append(raw("a raw NUL inside a string", text.encode().replace(b"NUL", b"a\x00b")))
    _, text = _text_envelope("lone surrogate", "SURROGATE")
    items.append(raw("a lone surrogate escape", text.encode().replace(b"SURROGATE", b"\\ud800")))
    _, text = _text_envelope("gzip")
    items.append(raw("a gzipped envelope", gzip.compress(text.encode(), mtime=0)))
    msgpack_id = new_id("msgpack")
    items.append(
        raw("a msgpack envelope", msgspec.msgpack.encode(envelope_fields(msgpack_id, "echo", 1)))
    )
    # These are envelopes after all: escapes, padding and unknown fields are valid JSON.
    items.append(valid("an escaped NUL", "echo", {"text": "a\u0000b"}))
    items.append(valid("an emoji and RTL text", "echo", {"text": "😀 \u202eevil"}))
    padded_id = new_id("padded")
    padded = b"\n\t " + json_body(envelope_fields(padded_id, "echo", 1)) + b" \r\n"
    items.append(Hostile("whitespace around the JSON", padded, HAPPY, padded_id))
    extra = valid("unknown top-level fields", "echo", 1, zzz={"a": [1, 2]}, __proto__=1)
    items.append(extra)
    first, last = new_id("dup-first"), new_id("dup-last")
    duplicated = json.dumps({"id": first, "route": {"curr": "echo"}, "id": last})  # noqa: F601
    items.append(Hostile("a duplicated id key (the last wins)", duplicated.encode(), HAPPY, last))
    return items


async def test_raw_garbage_is_recorded_as_malformed_by_its_hash(feeder):
    await feeder.start("echo")
    inputs = garbage()

    result = await feeder.feed("echo", inputs)

    assert result.problems == []
    assert (result.tried, result.recorded) == (26, 26)
    assert result.outcomes == {"error-end:MalformedEnvelope": 26}


async def test_odd_encodings_are_malformed_unless_they_are_json_after_all(feeder):
    await feeder.start("echo")
    inputs = encodings()

    result = await feeder.feed("echo", inputs)

    assert result.problems == []
    assert (result.tried, result.recorded) == (17, 17)
    assert result.outcomes == {"error-end:MalformedEnvelope": 12, "happy-end": 5}
