"""`run()` retries as each actor's policy says, but at once unless `backoff=True`.

The policies here wait an hour before a retry: a run that waited would run into its own
`timeout_s` and raise, so finishing at all shows the retry was not delayed.
"""

from __future__ import annotations

import pytest

from asya import RetryPolicy, actor
from asya.envelope import Reason
from asya.testing import run

AN_HOUR_MS = 3_600_000


def test_a_failing_call_is_retried_at_once_with_its_policys_attempts():
    calls = []

    @actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=AN_HOUR_MS))
    def flaky(doc):
        calls.append(doc)
        if len(calls) < 3:
            raise ConnectionError("model server busy")
        return {"ok": True}

    [final] = run([flaky], [{"n": 1}], timeout_s=30)

    assert final.payload == {"ok": True}
    assert len(calls) == 3


def test_a_call_that_keeps_failing_ends_after_its_attempts_with_each_error_recorded():
    @actor(retry=RetryPolicy(max_attempts=3, base_delay_ms=AN_HOUR_MS))
    def broken(doc):
        raise ValueError("no")

    [final] = run([broken], [{"n": 1}], timeout_s=30)

    assert final.status.reason is Reason.HANDLER_ERROR
    assert final.status.attempt == 3
    assert [e.attempt for e in final.status.retries] == [1, 2]


def test_backoff_true_waits_each_retrys_delay_as_asya_dev_does():
    @actor(retry=RetryPolicy(max_attempts=2, base_delay_ms=AN_HOUR_MS))
    def broken(doc):
        raise ValueError("no")

    with pytest.raises(TimeoutError):
        run([broken], [{"n": 1}], timeout_s=0.5, backoff=True)
