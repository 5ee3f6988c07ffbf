"""The sidecar process serves a runtime of the protocol before its own (2) end to end on a real
broker, with the results this version's runtime gives, and refuses one outside its window.

The protocol-2 runtime is `tests.protocol2`, serving a handler module of the pod's in this
test's process; the sidecar is the real `asya-sidecar` process."""

from __future__ import annotations

import asyncio
import importlib.util
import signal

from asya import Client
from asya.actor import ActorSpec, spec_of
from asya.envelope import Envelope, Phase, Reason
from tests.broker import Cluster, Pod
from tests.protocol2 import Protocol2Runtime

HANDLERS = """
import time
from asya import actor, Context

def work(doc, ctx):
    time.sleep(doc.get("sleep_s", 0))
    if doc.get("fail"):
        raise ValueError(f"no {doc['n']}")
    ctx.headers["seen"] = "yes"
    return {**doc, "n": doc["n"] + 1}

@actor
def old(doc, ctx: Context):
    return work(doc, ctx)

@actor
def new(doc, ctx: Context):
    return work(doc, ctx)
"""


def spec_in(cluster: Cluster, name: str) -> ActorSpec:
    """The spec of actor `name` in the cluster's handler module, loaded in this process."""
    found = importlib.util.spec_from_file_location(
        "handlers_p2", cluster.workdir / "handlers_it.py"
    )
    assert found is not None
    assert found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    spec = spec_of(getattr(module, name))
    assert spec is not None
    return spec


async def sidecar_beside(cluster: Cluster, actor: str, transport, actor_names) -> Pod:
    """A pod of `actor` whose runtime the test serves itself: only its sidecar is started."""
    actor_names.add(actor)
    await transport.declare(actor)
    pod = cluster.pod(actor, None)
    await pod.start()
    return pod


def outcome(final: Envelope) -> tuple[object, ...]:
    """What an envelope's end says of its call, whichever actor made it."""
    error = final.status.error
    return (
        final.status.phase,
        final.status.reason,
        final.payload,
        final.headers.get("seen"),
        None if error is None else (error.type, error.message),
    )


async def test_a_protocol2_runtime_is_served_end_to_end_with_this_versions_results(
    pods, transport, finals, actor_names
):
    cluster = await pods(HANDLERS, "new")
    payloads = [{"n": 1}, {"n": 2, "fail": True}]
    async with Protocol2Runtime(
        spec_in(cluster, "old"), str(cluster.workdir / "old.sock")
    ) as runtime:
        pod = await sidecar_beside(cluster, "old", transport, actor_names)
        client = Client(transport)
        sent = {
            actor: [await client.send([actor], payload) for payload in payloads]
            for actor in ("old", "new")
        }
        await finals.wait_for(4)
        await pod.stop()

    by_id = finals.by_id()
    old = [outcome(by_id[i]) for i in sent["old"]]
    assert old == [outcome(by_id[i]) for i in sent["new"]]
    assert old == [
        (Phase.SUCCEEDED, None, {"n": 2}, "yes", None),
        (
            Phase.FAILED,
            Reason.HANDLER_ERROR,
            {"n": 2, "fail": True},
            None,
            ("builtins.ValueError", "no 2"),
        ),
    ]
    assert runtime.frames_seen[0] == "Ping"


async def test_a_protocol2_runtime_gets_no_call_to_queue_and_no_drain_it_cannot_read(
    pods, transport, finals, actor_names
):
    cluster = await pods(HANDLERS)
    client = Client(transport)
    actor_names.add("old")
    await transport.declare("old")
    sent = {await client.send(["old"], {"n": n, "sleep_s": 0.05}) for n in range(6)}
    async with Protocol2Runtime(
        spec_in(cluster, "old"), str(cluster.workdir / "old.sock")
    ) as runtime:
        pod = await sidecar_beside(cluster, "old", transport, actor_names)
        await finals.wait_for(len(sent))
        assert pod.sidecar is not None
        pod.sidecar.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(pod.sidecar.wait(), 30)

    assert code == 0
    assert sent == set(finals.by_id())
    assert runtime.most_calls_held == 1  # its concurrency: one call runs, none waits
    assert "unreadable" not in runtime.frames_seen


class Protocol1Runtime(Protocol2Runtime):
    version = 1


async def test_a_runtime_older_than_the_window_is_refused_in_the_sidecars_log(
    pods, transport, actor_names
):
    cluster = await pods(HANDLERS)
    async with Protocol1Runtime(spec_in(cluster, "old"), str(cluster.workdir / "old.sock")):
        pod = await sidecar_beside(cluster, "old", transport, actor_names)
        logged = await wait_for_line(pod, "runtime refused")
        await pod.stop()

    assert "the runtime speaks frame protocol 1, older than this sidecar serves" in logged
    assert "rebuild the actor's image with the asya version of the operator" in logged


async def wait_for_line(pod: Pod, text: str, timeout_s: float = 30) -> str:
    """The first line of the pod's logs that holds `text`, once it is written."""
    async with asyncio.timeout(timeout_s):
        while True:
            for line in pod.output().splitlines():
                if text in line:
                    return line
            await asyncio.sleep(0.05)
