"""Requests: ids handed out per connection, answers matched by id, and everything still open
answered or failed, in the order sent, when the connection ends."""

from __future__ import annotations

import pytest

from asya.runtime.requests import Requests


async def test_each_request_gets_a_fresh_id_starting_at_1():
    requests: Requests[str, None] = Requests()

    ids = [requests.open(None).id for _ in range(3)]

    assert ids == [1, 2, 3]
    assert len(requests) == 3


async def test_an_answer_goes_to_the_request_of_its_id_and_takes_it_off():
    requests: Requests[str, None] = Requests()
    first, second = requests.open(None), requests.open(None)

    taken = requests.answer(second.id, "two")

    assert taken
    assert second.answer.result() == "two"
    assert not first.answer.done()
    assert [r.id for r in requests] == [first.id]


async def test_an_answer_to_an_unknown_id_is_ignored():
    requests: Requests[str, None] = Requests()
    request = requests.open(None)

    taken = requests.answer(request.id + 1, "stray")

    assert not taken
    assert not request.answer.done()
    assert len(requests) == 1


async def test_a_second_answer_to_the_same_id_is_ignored():
    requests: Requests[str, None] = Requests()
    request = requests.open(None)
    requests.answer(request.id, "first")

    taken = requests.answer(request.id, "again")

    assert not taken
    assert request.answer.result() == "first"


async def test_an_answer_to_a_request_whose_caller_stopped_waiting_is_ignored():
    requests: Requests[str, None] = Requests()
    request = requests.open(None)
    request.answer.cancel()  # its caller was cancelled while awaiting it

    taken = requests.answer(request.id, "late")

    assert not taken
    assert len(requests) == 0


async def test_a_closed_request_is_taken_off_and_later_answers_to_it_are_ignored():
    requests: Requests[str, None] = Requests()
    request = requests.open(None)

    assert requests.close(request.id)
    assert not requests.close(request.id)
    assert not requests.answer(request.id, "late")
    assert len(requests) == 0
    assert not request.answer.done()


async def test_open_requests_are_listed_in_the_order_sent_with_their_context():
    requests: Requests[str, str] = Requests()
    for name in ("a", "b", "c", "d"):
        requests.open(name)
    requests.answer(2, "answered")

    assert [(r.id, r.context) for r in requests] == [(1, "a"), (3, "c"), (4, "d")]


async def test_the_end_answers_every_open_request_in_the_order_sent_and_takes_them_off():
    requests: Requests[str, str] = Requests()
    opened = [requests.open(name) for name in ("a", "b", "c")]
    requests.answer(opened[1].id, "answered")
    seen: list[str] = []

    def answer_of(request):
        seen.append(request.context)
        return f"ended {request.context}"

    requests.end(answer_of)

    assert seen == ["a", "c"]  # the one answered already is not answered again
    assert [r.answer.result() for r in opened] == ["ended a", "answered", "ended c"]
    assert len(requests) == 0


async def test_a_failure_fails_every_open_request_with_its_own_error_and_takes_them_off():
    requests: Requests[str, None] = Requests()
    opened = [requests.open(None) for _ in range(3)]
    made: list[ConnectionError] = []

    def error() -> ConnectionError:
        made.append(ConnectionError(f"gone {len(made)}"))
        return made[-1]

    requests.fail(error)

    assert [r.answer.exception() for r in opened] == made
    assert [str(e) for e in made] == ["gone 0", "gone 1", "gone 2"]
    assert len(requests) == 0
    with pytest.raises(ConnectionError, match="gone 0"):
        await opened[0].answer
