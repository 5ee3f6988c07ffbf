"""The cluster client on the stand-in cluster: what a namespaced operator's admission reads."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

import kmock
import kubernetes
import pytest
import urllib3
from asya_operator.api.actor import AsyncActor
from asya_operator.api.template import GROUP, VERSION
from asya_operator.kube import Kube
from asya_operator.plans.nodes import Node
from kubernetes.client import CustomObjectsApi

from tests.operator.test_controller_admission import gpu_actor, pool_body


async def test_a_namespaced_client_reads_the_admission_world_of_its_namespace_only(
    world, quota, kube
):
    create, _patch = quota
    await create("resourcepools", pool_body(4))
    custom = CustomObjectsApi(kube)
    other = f"{world.namespace}-other"
    await world.create_actor(gpu_actor("mine", replicas=1))
    await asyncio.to_thread(
        custom.create_namespaced_custom_object,
        GROUP,
        VERSION,
        other,
        "asyncactors",
        gpu_actor("theirs", replicas=1),
    )
    client = Kube(world.namespace)
    await client.connect()

    scoped = await client.admission_world()
    everything = await Kube().admission_world()

    assert [(ns, a.metadata["name"]) for ns, a in scoped.actors] == [(world.namespace, "mine")]
    assert {(ns, a.metadata["name"]) for ns, a in everything.actors} == {
        (world.namespace, "mine"),
        (other, "theirs"),
    }
    assert [p.metadata["name"] for p in scoped.pools] == ["team-a"]


async def test_a_client_given_several_namespaces_reads_each_of_them_and_no_other(
    world, quota, kube
):
    create, _patch = quota
    await create("resourcepools", pool_body(4))
    custom = CustomObjectsApi(kube)
    second, unwatched = f"{world.namespace}-b", f"{world.namespace}-c"
    await world.create_actor(gpu_actor("first", replicas=1))
    for namespace, name in ((second, "second"), (unwatched, "unwatched")):
        await asyncio.to_thread(
            custom.create_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            "asyncactors",
            gpu_actor(name, replicas=1),
        )
    client = Kube(world.namespace, second)
    await client.connect()

    scoped = await client.admission_world()

    assert sorted((ns, a.metadata["name"]) for ns, a in scoped.actors) == [
        (world.namespace, "first"),
        (second, "second"),
    ]


class SilentServer:
    """A TCP server that accepts connections, reads requests and never answers: an API server
    that hangs. Closing it closes every connection it took."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._taken: list[socket.socket] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _address = self._listener.accept()
                self._taken.append(connection)

    def close(self) -> None:
        self._listener.close()
        for connection in self._taken:
            connection.close()


def test_a_call_to_an_api_server_that_never_answers_ends_and_so_does_its_thread(monkeypatch):
    # The operator's stop waits for the client's worker threads (and asyncio.run for its own):
    # a call whose socket waited for ever held that stop for ever, after its caller had long
    # given up.
    server = SilentServer()
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.port}"
    monkeypatch.setattr(kubernetes.client.Configuration, "_default", configuration)
    outcome: list[BaseException | None] = []

    async def call() -> None:
        kube = Kube(timeout_s=0.2)
        try:
            await kube.read(AsyncActor, "ns", "name")
        finally:
            await kube.close()  # returns once the client's threads have ended

    def run() -> None:
        try:
            asyncio.run(call())  # returns once the loop's worker threads have ended
            outcome.append(None)
        except BaseException as exc:  # the outcome is what the test reads
            outcome.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    try:
        runner.start()
        runner.join(timeout=30.0)  # a bound on a hang, not a measure of speed
        assert not runner.is_alive(), "the loop never closed: the call's thread still waits"
    finally:
        server.close()
    [error] = outcome
    assert isinstance(error, TimeoutError | urllib3.exceptions.HTTPError), error


async def test_the_bound_is_on_the_call_not_on_its_wait_for_a_thread():
    # A burst queues calls for the client's threads; one that waited its turn longer than the
    # bound, then was answered at once, is answered, not failed as an API server that never
    # answered (it failed after the bound with TimeoutError, and its status update was lost).
    kube = Kube(timeout_s=0.5, threads=2)
    release = threading.Event()
    holding = [asyncio.ensure_future(kube._call(lambda _api: release.wait(30.0))) for _ in range(2)]
    try:
        # When: a call waits for a thread three bounds long (the server itself answers at once)
        queued = asyncio.ensure_future(kube._call(lambda _api: "answered"))
        await asyncio.sleep(1.5)
        assert not queued.done()
        release.set()

        # Then: the calls that held the threads past the bound failed; the queued one did not
        assert await queued == "answered"
        held = await asyncio.gather(*holding, return_exceptions=True)
        assert [type(outcome) for outcome in held] == [TimeoutError, TimeoutError]
    finally:
        release.set()
        await kube.close()


async def test_a_call_whose_caller_gives_up_while_it_waits_for_a_thread_is_never_made():
    kube = Kube(threads=1)
    release = threading.Event()
    made: list[str] = []
    holding = asyncio.ensure_future(kube._call(lambda _api: release.wait(30.0)))
    try:
        queued = asyncio.ensure_future(kube._call(lambda _api: made.append("made")))
        await asyncio.sleep(0)  # queued behind the held thread

        # When: the caller gives up (and is done giving up) before a thread is free
        queued.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await queued
        release.set()
        await holding
        await kube._call(lambda _api: made.append("after"))

        # Then
        assert queued.cancelled()
        assert made == ["after"]
    finally:
        release.set()
        await kube.close()


def node_body(name: str, gpus: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpu": "h100"}},
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"cpu": "16", "nvidia.com/gpu": gpus},
        },
    }


async def test_the_admission_world_holds_the_clusters_nodes(world, kube):
    core = kubernetes.client.CoreV1Api(kube)
    await asyncio.to_thread(core.create_node, node_body("gpu-1", "0"))
    client = Kube(world.namespace)
    await client.connect()

    found = await client.admission_world()

    assert found.nodes == [
        Node(
            name="gpu-1",
            labels={"gpu": "h100"},
            ready=True,
            unschedulable=True,
            allocatable={"cpu": "16", "nvidia.com/gpu": "0"},
        )
    ]


async def test_nodes_that_cannot_be_listed_are_unknown_and_said_once(world, quota, cluster, caplog):
    create, _patch = quota
    await create("resourcepools", pool_body(4))
    cluster.resources.pop(kmock.resource("v1/nodes"))  # the stand-in answers 404 for them now
    client = Kube(world.namespace)
    await client.connect()

    first = await client.admission_world()
    second = await client.admission_world()

    assert (first.nodes, second.nodes) == (None, None)
    assert [p.metadata["name"] for p in second.pools] == ["team-a"]  # the rest is read
    said = [r for r in caplog.records if r.getMessage() == "nodes not listed"]
    assert len(said) == 1


@pytest.mark.parametrize(
    ("answer", "served"), [(404, set()), (403, {"volcano"}), (500, {"volcano"})]
)
def test_a_gang_schedulers_podgroups_that_cannot_be_read_fail_no_pass(
    monkeypatch, caplog, answer, served
):
    # 404: the scheduler is not installed (its groups are Degraded for it); any other answer:
    # what it says is unknown this pass, and admitting everyone else goes on.
    from asya_operator import kube as module

    def refuse(*_args, **_kwargs):
        raise kubernetes.client.ApiException(status=answer, reason="no")

    monkeypatch.setattr(module, "_list", refuse)

    states = module._gang_states(None, "ml-b", ["volcano"])

    assert (states.served, states.unplaced) == (served, {})
    assert ("gang scheduler's PodGroups not read" in caplog.text) is (answer != 404)


@pytest.mark.parametrize("missing", [False, True], ids=["applied", "created"])
def test_objects_are_written_with_strict_field_validation(monkeypatch, missing):
    # The API server then refuses a field it does not know, naming it (a misspelt field in a
    # free-form volume source), where by default it would drop it with a warning.
    from asya_operator import kube as kube_module
    from kubernetes.client import ApiClient
    from kubernetes.client.exceptions import ApiException

    sent = []

    class SentError(Exception):
        """The request is built: nothing goes out."""

    api = ApiClient()
    serialize = api.param_serialize

    def param_serialize(method, resource_path, *args, query_params=None, **kwargs):
        sent.append((method, dict(query_params or [])))
        return serialize(method, resource_path, *args, query_params=query_params, **kwargs)

    def call_api(method, *args, **kwargs):
        if missing and method == "PATCH":
            raise ApiException(status=404)
        raise SentError

    monkeypatch.setattr(api, "param_serialize", param_serialize)
    monkeypatch.setattr(api, "call_api", call_api)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "score", "namespace": "ml"},
        "spec": {},
    }

    with pytest.raises(SentError):
        kube_module._apply_object(api, deployment)

    assert [method for method, _ in sent] == (["PATCH", "POST"] if missing else ["PATCH"])
    assert all(query["fieldValidation"] == "Strict" for _, query in sent), sent
