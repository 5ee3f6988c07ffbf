"""`asya results` lists what a run kept; `asya replay` sends failures back, each exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import sys

import pytest

from asya.actor import actor, spec_of
from asya.clock import SystemClock
from asya.envelope import END_LIMITS, Reason, encode_envelope
from asya.local.mesh import Mesh, MeshOptions
from asya.local.report import RunStats
from asya.outcome import Failure
from asya.retry import RetryPolicy
from asya.routing import plan_failure
from asya.transport.records import RecordKind
from tests.factories import T0, envelope
from tests.fixtures_broker import Finals


async def _ignore(envelope):
    return None


def _app(flag):
    @actor(name="fix-me", retry=RetryPolicy(max_attempts=1))
    def fix_me(payload):
        if not flag.exists():
            raise RuntimeError("not fixed yet")
        return payload

    return [spec_of(fix_me)]


@contextlib.asynccontextmanager
async def _mesh(transport, flag):
    finals = Finals()
    async with Mesh(
        _app(flag),
        transport=transport,
        hooks=RunStats(_ignore),
        sink=finals,
        clock=SystemClock(),
        rng=random.Random(),
        options=MeshOptions(grace_s=1),
    ):
        yield finals


async def _asya(amqp_url, namespace, *args):
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "asya.cli", *args, "--broker", amqp_url, "--namespace", namespace,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode, out.decode(), err.decode()


def _lines(out):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


async def _send(transport, ids):
    for envelope_id in ids:
        body = encode_envelope(
            envelope("fix-me", id=envelope_id, payload={"n": envelope_id}), END_LIMITS
        )
        await transport.publish("fix-me", body)


async def test_results_lists_every_final_and_failed_lists_every_failure_with_its_reason(
    transport, amqp_url, namespace, tmp_path, actor_names
):
    actor_names.add("fix-me")
    flag = tmp_path / "fixed"
    async with _mesh(transport, flag) as finals:
        await _send(transport, ["bad-1", "bad-2"])
        await finals.wait_for(2)
        flag.touch()
        await _send(transport, ["good-1"])
        await finals.wait_for(3)

    code, out, _ = await _asya(amqp_url, namespace, "results")
    failed_code, failed_out, _ = await _asya(amqp_url, namespace, "results", "--failed")

    assert (code, [e["id"] for e in _lines(out)]) == (0, ["good-1"])
    failures = _lines(failed_out)
    assert failed_code == 0
    assert sorted((e["id"], e["status"]["reason"]) for e in failures) == [
        ("bad-1", "HandlerError"),
        ("bad-2", "HandlerError"),
    ]


async def test_results_filters_by_id_reason_and_actor_and_prints_a_table(
    transport, amqp_url, namespace, tmp_path, actor_names
):
    actor_names.add("fix-me")
    async with _mesh(transport, tmp_path / "never") as finals:
        await _send(transport, ["bad-1", "bad-2"])
        await finals.wait_for(2)

    _, by_id, _ = await _asya(amqp_url, namespace, "results", "--failed", "--id", "bad-2")
    _, by_reason, _ = await _asya(amqp_url, namespace, "results", "--failed", "--reason", "Timeout")
    _, by_actor, _ = await _asya(amqp_url, namespace, "results", "--failed", "--actor", "fix-me")
    _, table, _ = await _asya(amqp_url, namespace, "results", "--failed", "--table")

    assert [e["id"] for e in _lines(by_id)] == ["bad-2"]
    assert _lines(by_reason) == []
    assert sorted(e["id"] for e in _lines(by_actor)) == ["bad-1", "bad-2"]
    assert table.splitlines()[0].split() == ["OFFSET", "STORED", "AT", "ID", "ACTOR", "REASON"]
    assert sorted(line.split()[2] for line in table.splitlines()[1:]) == ["bad-1", "bad-2"]


async def test_replay_after_a_fix_sends_every_failure_back_and_a_second_replay_sends_none(
    transport, amqp_url, namespace, tmp_path, actor_names
):
    actor_names.add("fix-me")
    flag = tmp_path / "fixed"
    async with _mesh(transport, flag) as finals:
        await _send(transport, ["bad-1", "bad-2", "bad-3"])
        await finals.wait_for(3)
        flag.touch()

        code, _, err = await _asya(amqp_url, namespace, "replay")
        await finals.wait_for(6)
        again, _, err_again = await _asya(amqp_url, namespace, "replay")

    replayed = finals.envelopes[3:]
    assert code == 0
    assert "replayed 3" in err
    assert "HandlerError" in err
    assert sorted(e.id for e in replayed) == ["bad-1", "bad-2", "bad-3"]
    assert all(e.status.reason is None for e in replayed)
    assert all(e.headers["asya-replay-of"].endswith(f":{e.id}") for e in replayed)
    assert [r.message for r in replayed[0].status.retries] == ["not fixed yet"]
    assert again == 0
    assert "replayed 0, skipped 3 replayed before" in err_again


async def test_replay_dry_run_prints_and_sends_nothing(transport, amqp_url, namespace):
    await transport.declare("fix-me")
    await _fail(transport, ["bad-1"])

    code, out, _ = await _asya(amqp_url, namespace, "replay", "--dry-run")
    _, _, err_after = await _asya(amqp_url, namespace, "replay", "--dry-run")

    (planned,) = _lines(out)
    assert (code, planned["id"], planned["status"]["attempt"]) == (0, "bad-1", 1)
    assert (await transport.depth("fix-me")).ready == 0
    assert "would replay 1" in err_after


async def test_replay_of_an_unknown_id_says_so_and_exits_1(transport, amqp_url, namespace):
    await _fail(transport, ["bad-1"])

    code, _, err = await _asya(amqp_url, namespace, "replay", "--id", "nope")

    assert code == 1
    assert "no failure with id 'nope'" in err


@pytest.mark.parametrize("command", ["results", "replay"])
async def test_a_bad_since_says_which_formats_it_takes(amqp_url, namespace, command):
    code, _, err = await _asya(amqp_url, namespace, command, "--since", "yesterday")

    assert code == 2
    assert "ISO 8601" in err
    assert "10m" in err


async def _fail(transport, ids):
    """Failures kept at error-end's log, as a run that failed them would keep them."""
    for envelope_id in ids:
        failure = Failure(
            reason=Reason.HANDLER_ERROR,
            type="RuntimeError",
            message="not fixed yet",
            retryable=True,
        )
        failed = plan_failure(
            envelope("fix-me", id=envelope_id), failure, delay_ms=None, max_attempts=1, now=T0
        ).envelope
        await transport.records.append(RecordKind.FAILURES, encode_envelope(failed, END_LIMITS))


async def _ledger_length(transport):
    return len([r async for r in transport.records.read(RecordKind.REPLAYS)])


async def _until_the_ledger_has_entries(transport):
    """Tail the ledger until its first entry: the replay has started sending."""
    async with (
        asyncio.timeout(60),
        contextlib.aclosing(transport.records.read(RecordKind.REPLAYS, follow=True)) as ledger,
    ):
        await anext(ledger)


async def test_a_replay_killed_half_way_and_run_again_replays_each_failure_exactly_once(
    transport, amqp_url, namespace, tmp_path, actor_names
):
    actor_names.add("fix-me")
    ids = [f"bad-{i}" for i in range(400)]
    await transport.declare("fix-me")
    await _fail(transport, ids)
    flag = tmp_path / "fixed"
    flag.touch()

    async with _mesh(transport, flag) as finals:
        killed = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "asya.cli", "replay", "--broker", amqp_url,
            "--namespace", namespace, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await _until_the_ledger_has_entries(transport)
        killed.send_signal(signal.SIGKILL)
        await killed.wait()
        at_kill = await _ledger_length(transport)
        code, _, err = await _asya(amqp_url, namespace, "replay")
        await finals.wait_for(len(ids), timeout_s=120)

    counts = {}
    for final in finals.envelopes:
        counts[final.id] = counts.get(final.id, 0) + 1
    assert 0 < at_kill < len(ids), "the first replay was not killed half-way"
    assert code == 0
    assert f"replayed {len(ids) - at_kill}, skipped {at_kill}" in err
    assert counts == dict.fromkeys(ids, 1)
    assert await _ledger_length(transport) == len(ids)


async def test_results_follow_prints_new_finals_until_sigterm(transport, amqp_url, namespace):
    await _fail(transport, ["before"])
    follower = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "asya.cli", "results", "--failed", "--follow",
        "--broker", amqp_url, "--namespace", namespace,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    first = json.loads(await asyncio.wait_for(follower.stdout.readline(), 60))

    await _fail(transport, ["after"])
    second = json.loads(await asyncio.wait_for(follower.stdout.readline(), 60))
    follower.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(follower.wait(), 60)

    assert (first["id"], second["id"]) == ("before", "after")
    assert code == 143
