"""A batch handler in the runtime's worker process: typed items and one Context per item, each
item's route and headers coming back with its own output, a misfit failing alone."""

from __future__ import annotations

import textwrap

from asya.envelope import Envelope, Reason, Route
from asya.outcome import Failure
from tests.integration.runtime.processes import connect, start_runtime

HANDLERS = textwrap.dedent(
    """
    import dataclasses

    from asya import Context, actor

    @dataclasses.dataclass
    class Doc:
        text: str

    @dataclasses.dataclass
    class Scored:
        text: str
        score: float

    @actor(batch=8)
    class Classify:
        def __call__(self, docs: list[Doc], ctxs: list[Context]) -> list[Scored]:
            results = []
            for doc, ctx in zip(docs, ctxs):
                score = len(doc.text) / 10
                if score < 0.5:
                    ctx.route.next = ["review", *ctx.route.next]
                    ctx.headers["why"] = "low confidence"
                results.append(Scored(text=doc.text, score=score))
            return results
    """
)


def item(id: str, payload: object) -> Envelope:
    return Envelope(id=id, route=Route(curr="classify", next=("store",)), payload=payload)


async def test_a_worker_routes_each_item_of_a_batch_by_its_own_context(tmp_path):
    rt = await start_runtime(tmp_path, HANDLERS, "handlers_mod:Classify")
    client = await connect(rt)
    try:
        sure, unsure, misfit = await client.invoke(
            [item("a", {"text": "long enough"}), item("b", {"text": "no"}), item("c", {"t": 1})]
        )
    finally:
        await client.aclose()
        await rt.stop()

    assert [(o.payload, o.next, o.headers) for o in sure.outputs] == [
        ({"text": "long enough", "score": 1.1}, ("store",), {})
    ]
    assert [(o.payload, o.next, o.headers) for o in unsure.outputs] == [
        ({"text": "no", "score": 0.2}, ("review", "store"), {"why": "low confidence"})
    ]
    assert isinstance(misfit, Failure)
    assert misfit.reason is Reason.MALFORMED_ENVELOPE
    assert "payload: Object missing required field `text`" in misfit.message
