"""An LLM-as-judge loop: generate an answer, judge it against a rubric, refine until it passes.

    generate -> judge -> (refine -> judge)* -> (happy-end)

`judge` decides at runtime whether the loop goes round again, by rewriting the route: it
inserts `refine, judge` before whatever comes next. Three things end a loop that would not
converge:
- the judge's own budget: after `max_rounds` refinements (payload, default `MAX_ROUNDS`) it
  stops and returns the best answer with `verdict: "rejected"`;
- the envelope's deadline: when `status.deadline_at` leaves less than `ROUND_S` for another
  round, the judge stops with `verdict: "out-of-time"`; a deadline already passed sends the
  envelope to `error-end` as `DeadlineExceeded` before any model is called;
- asya's hop limit (64 actors per envelope, `asya dev --hop-limit N`): a loop whose own
  budget is too large ends at `error-end` as `HopLimitExceeded`, whatever the code does.

The model is the deterministic stand-in unless `LLM_BASE_URL` names an OpenAI-compatible
server (`judge_models.py`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from judge_models import from_environment

from asya import Context, RetryPolicy, actor

ROUTE = ["generate", "judge"]
PASS_SCORE = 0.99
"""The judge accepts an answer that covers every rubric point."""
MAX_ROUNDS = 4
"""Refinements the judge allows when the payload does not say."""
ROUND_S = 30.0
"""Time one more round (refine, then judge) is expected to take with a real model."""

# A model server may fail now and then: retry, waiting longer each time.
_CALLS = {"timeout_s": 60, "retry": RetryPolicy(max_attempts=3, base_delay_ms=500)}


@actor(**_CALLS)
class Generate:
    """A first answer to `question`."""

    def __init__(self) -> None:
        self.model = from_environment()

    def __call__(self, task: dict) -> dict:
        answer = self.model.generate(task["question"])
        return {**task, "answer": answer, "round": 0, "scores": []}


@actor(**_CALLS)
class Judge:
    """Score the answer; send it round the loop again, or let it go with a verdict."""

    def __init__(self) -> None:
        self.model = from_environment()

    def __call__(self, task: dict, ctx: Context) -> dict:
        verdict = self.model.judge(task["question"], task["answer"], task["rubric"])
        task = {**task, "missing": verdict.missing, "scores": [*task["scores"], verdict.score]}
        if verdict.score >= PASS_SCORE:
            return {**task, "verdict": "accepted"}
        if task["round"] >= task.get("max_rounds", MAX_ROUNDS):
            return {**task, "verdict": "rejected"}
        if ctx.deadline_at is not None and seconds_left(ctx.deadline_at) < ROUND_S:
            return {**task, "verdict": "out-of-time"}
        ctx.route.next[:0] = ["refine", "judge"]
        return task


@actor(**_CALLS)
class Refine:
    """The answer improved on the judge's feedback (the rubric points it missed)."""

    def __init__(self) -> None:
        self.model = from_environment()

    def __call__(self, task: dict) -> dict:
        answer = self.model.refine(task["question"], task["answer"], task["missing"])
        return {**task, "answer": answer, "round": task["round"] + 1}


def seconds_left(deadline_at: datetime) -> float:
    """Seconds until `deadline_at` (negative once it has passed)."""
    return (deadline_at - datetime.now(UTC)).total_seconds()
