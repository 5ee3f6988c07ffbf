"""examples/llm-judge: generate -> judge -> refine, looping through a rewritten route until the
judge accepts, its round budget, the deadline or the hop limit ends it."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from asya.envelope import Reason
from asya.testing import call_actor, make_context, run
from tests.examples.commands import EXAMPLES, asya_dev, render

APP = EXAMPLES / "llm-judge"


@pytest.fixture
def judge_loop(monkeypatch):
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.syspath_prepend(str(APP))
    import judge_loop
    import judge_models

    return judge_loop, judge_models


def test_answers_go_round_the_loop_until_the_judge_accepts_or_its_budget_runs_out():
    code, finals, stderr = asya_dev("llm-judge", "inputs.jsonl")

    outcome = {
        f["payload"]["id"]: (f["payload"]["verdict"], f["payload"]["scores"], f["route"]["prev"])
        for f in finals
    }
    assert code == 0, stderr
    assert outcome["q1"] == ("accepted", [0.667, 1.0], ["generate", "judge", "refine", "judge"])
    assert outcome["q2"][:2] == ("accepted", [0.333, 0.667, 1.0])
    assert outcome["q3"][:2] == ("accepted", [0.333, 1.0])  # one fact covers two points
    assert outcome["q4"][:2] == ("accepted", [0.5, 1.0])
    # The stand-in knows nothing of "dot product": four refinements, then the judge gives up.
    verdict, scores, route = outcome["q5"]
    assert (verdict, len(scores), route.count("refine")) == ("rejected", 5, 4)


def test_a_runaway_loop_meets_the_hop_limit_and_a_passed_deadline_calls_no_model():
    code, finals, _ = asya_dev("llm-judge", "runaway.jsonl")

    ends = {
        f["payload"]["id"]: (f["status"]["reason"], len(f["route"]["prev"]), f["status"]["actor"])
        for f in finals
    }
    assert code == 1
    assert ends["r1"] == (Reason.HOP_LIMIT_EXCEEDED.value, 64, "refine")
    assert ends["r2"] == (Reason.DEADLINE_EXCEEDED.value, 0, "generate")
    assert ends["r3"][0] is None


def test_the_hop_limit_is_the_runs_own_setting():
    code, finals, _ = asya_dev("llm-judge", "runaway.jsonl", "--hop-limit", "10")

    [runaway] = [f for f in finals if f["payload"]["id"] == "r1"]
    assert code == 1
    assert (runaway["status"]["reason"], len(runaway["route"]["prev"])) == ("HopLimitExceeded", 10)


def test_pytest_gets_the_same_verdicts():
    inputs = [json.loads(line) for line in (APP / "inputs.jsonl").read_text().splitlines()]

    results = run(str(APP), inputs)

    assert [p["verdict"] for p in results.payloads] == ["accepted"] * 4 + ["rejected"]


def test_the_judge_stops_refining_when_the_deadline_leaves_no_time_for_a_round(judge_loop):
    loop, _ = judge_loop
    task = {"question": "q", "rubric": ["majority"], "answer": "no", "round": 0, "scores": []}
    soon = datetime.now(UTC) + timedelta(seconds=loop.ROUND_S / 2)
    later = datetime.now(UTC) + timedelta(seconds=loop.ROUND_S * 20)

    near = call_actor(loop.Judge, task, context=make_context(route=["judge"], deadline_at=soon))
    far = call_actor(loop.Judge, task, context=make_context(route=["judge"], deadline_at=later))

    assert (near.payloads[0]["verdict"], near.outputs[0].next) == ("out-of-time", ())
    assert far.outputs[0].next == ("refine", "judge")


class _FakeServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint on the loopback, answering from a script."""

    replies: list[str] = []
    requests: list[tuple[str, str | None, dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append((self.path, self.headers.get("Authorization"), body))
        reply = json.dumps({"choices": [{"message": {"content": self.replies.pop(0)}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        return None


@pytest.fixture
def fake_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FakeServer.requests.clear()
    yield server, _FakeServer
    server.shutdown()
    server.server_close()
    thread.join()


def test_llm_base_url_swaps_the_stand_in_for_an_openai_compatible_server(judge_loop, fake_server):
    _, models = judge_loop
    server, handler = fake_server
    handler.replies[:] = [
        "A draft.",
        'Sure: {"missing": ["majority"]}',
        "A draft about the majority.",
        '{"missing": []}',
    ]
    url = f"http://127.0.0.1:{server.server_port}/v1"
    model = models.from_environment({"LLM_BASE_URL": url, "LLM_MODEL": "m", "LLM_API_KEY": "k"})

    draft = model.generate("Why?")
    first = model.judge("Why?", draft, ["majority", "odd number"])
    better = model.refine("Why?", draft, first.missing)
    second = model.judge("Why?", better, ["majority"])

    assert (draft, better) == ("A draft.", "A draft about the majority.")
    assert (first.score, first.missing, second.score) == (0.5, ["majority"], 1.0)
    assert {(path, auth, body["model"]) for path, auth, body in handler.requests} == {
        ("/v1/chat/completions", "Bearer k", "m")
    }


def test_llm_base_url_without_a_model_name_is_refused_naming_the_variable(judge_loop):
    _, models = judge_loop

    with pytest.raises(ValueError, match="LLM_MODEL is not"):
        models.from_environment({"LLM_BASE_URL": "http://127.0.0.1:1/v1"})

    assert isinstance(models.from_environment({}), models.StandIn)


def test_render_writes_each_step_with_its_timeout_and_retry_policy(tmp_path):
    values, objects = render("llm-judge", tmp_path=tmp_path)

    assert {name: a["handler"] for name, a in values["actors"].items()} == {
        "generate": "judge_loop:Generate",
        "judge": "judge_loop:Judge",
        "refine": "judge_loop:Refine",
    }
    assert {a["retry"]["maxAttempts"] for a in values["actors"].values()} == {3}
    assert len(objects) == 3
