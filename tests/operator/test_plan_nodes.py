"""Which accelerators a flavor's nodes advertise none of: Ready, uncordoned nodes with the
flavor's labels, each accelerator the pod asks for judged by their `status.allocatable`."""

from __future__ import annotations

import pytest
from asya_operator.plans.nodes import lacking_accelerators, node_of

from tests.operator.plan_builders import resource_flavor

H100 = resource_flavor("h100", nodeLabels={"gpu": "h100"})
GPU_POD = {"cpu": 1000, "nvidia.com/gpu": 1000}


def node(name="n1", *, labels=None, ready="True", unschedulable=None, gpus="0", **allocatable):
    spec = {} if unschedulable is None else {"unschedulable": unschedulable}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = gpus
    return node_of(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"gpu": "h100"} if labels is None else labels},
            "spec": spec,
            "status": {
                "conditions": [{"type": "Ready", "status": ready}],
                "allocatable": {"cpu": "16", "memory": "64Gi", **allocatable},
            },
        }
    )


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        (
            [node("n1"), node("n2")],
            "ResourceFlavor h100: its 2 Ready nodes advertise no allocatable nvidia.com/gpu"
            " (is the device plugin running?)",
        ),
        (
            [node("n1", gpus=None)],
            "ResourceFlavor h100: its 1 Ready node advertises no allocatable nvidia.com/gpu"
            " (is the device plugin running?)",
        ),
        (
            # The GPUs are on a node that is not Ready, or cordoned: no pod lands there.
            [
                node("n1"),
                node("n2", ready="False", gpus="8"),
                node("n3", unschedulable=True, gpus="8"),
            ],
            "ResourceFlavor h100: its 1 Ready node advertises no allocatable nvidia.com/gpu"
            " (is the device plugin running?)",
        ),
        (
            [node("n1", ready="Unknown", gpus="8"), node("n2", unschedulable=True, gpus="8")],
            "ResourceFlavor h100: no Ready, schedulable node with labels gpu=h100; 2 with its"
            " labels not Ready or cordoned, so no nvidia.com/gpu to run on (a cluster autoscaler"
            " may be adding one)",
        ),
        (
            [node("n1", labels={"gpu": "a100"}, gpus="8")],
            "ResourceFlavor h100: no Ready, schedulable node with labels gpu=h100, so no"
            " nvidia.com/gpu to run on (a cluster autoscaler may be adding one)",
        ),
    ],
    ids=[
        "zero allocatable",
        "none listed",
        "GPUs only off limits",
        "not ready or cordoned",
        "labels not matching",
    ],
)
def test_a_flavor_whose_nodes_advertise_no_gpu_is_named(nodes, message):
    shortage = lacking_accelerators(H100, nodes, GPU_POD)

    assert shortage is not None
    assert (shortage.flavor, shortage.resources) == ("h100", ("nvidia.com/gpu",))
    assert shortage.message == message


@pytest.mark.parametrize(
    ("flavor", "nodes", "requests"),
    [
        (H100, [node("n1"), node("n2", gpus="2")], GPU_POD),
        (resource_flavor("any"), [node("n1", labels={}, gpus="1")], GPU_POD),
        (H100, [node("n1")], {"cpu": 1000, "memory": 1024}),
        (H100, [node("n1")], {"nvidia.com/gpu": 0}),
        (H100, [], GPU_POD),
    ],
    ids=[
        "one node advertises GPUs",
        "a flavor without labels has every node",
        "a pod that asks for no accelerator",
        "zero GPUs asked",
        "no Node listed at all says nothing",
    ],
)
def test_nothing_is_named_when_the_nodes_serve_what_the_pod_asks(flavor, nodes, requests):
    assert lacking_accelerators(flavor, nodes, requests) is None


def test_only_the_accelerators_the_pod_asks_for_and_lacks_are_named():
    nodes = [node("n1", gpus="8", **{"amd.com/gpu": "0", "example.com/fpga": "0"})]

    shortage = lacking_accelerators(H100, nodes, {**GPU_POD, "amd.com/gpu": 1000})

    assert shortage is not None
    assert shortage.resources == ("amd.com/gpu",)
