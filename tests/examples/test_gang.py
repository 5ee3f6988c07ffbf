"""examples/gang: an ActorGroup whose ranks rendezvous before working, its admission (pending,
then admitted whole), its objects, and its local run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import yaml
from asya_operator.cli import main as operator_main

from asya.cli import main as asya_main
from asya.gang import Membership
from asya.local.discovery import load_app
from asya.testing import run
from tests.charts.chart_checks import of_kind
from tests.examples.commands import EXAMPLES, asya_dev, render

APP = EXAMPLES / "gang"


@pytest.fixture
def gang(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from gang import members, rendezvous

    return members, rendezvous


def test_asya_dev_runs_every_job_over_a_local_gang_of_four_ranks():
    code, finals, stderr = asya_dev("gang", "inputs.jsonl")

    jobs = {f["payload"]["job"]: f["payload"] for f in finals}
    assert code == 0, stderr
    assert {job["ranks"] for job in jobs.values()} == {4}
    assert all(sum(job["words_per_rank"]) == job["words"] for job in jobs.values())
    assert min(jobs["j1"]["words_per_rank"]) > 0  # eight documents: every rank had a share
    assert jobs["j3"]["words_per_rank"] == [7, 0, 0, 0]


def test_pytest_gets_the_same_counts():
    [job] = run(str(APP), [{"job": "j", "documents": ["a b", "c", "d e f", "g"]}]).payloads

    assert (job["ranks"], job["words_per_rank"], job["words"]) == (4, [2, 1, 3, 1], 7)


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_ranks_in_processes_of_their_own_rendezvous_by_the_operators_variables(gang, monkeypatch):
    members, _ = gang
    group = {
        "ASYA_GROUP": "eval",
        "ASYA_GROUP_INSTANCE": "0",
        "ASYA_GROUP_SIZE": "4",
        "ASYA_GROUP_LEADER": "127.0.0.1",
        "GANG_PORT": str(_free_port()),
    }
    pythonpath = os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")])
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", "from gang.members import Worker; Worker().serving.join()"],
            env={
                **os.environ,
                **group,
                "PYTHONPATH": pythonpath,
                "ASYA_GROUP_MEMBER": "worker",
                "ASYA_GROUP_MEMBER_INDEX": str(index),
                "ASYA_GROUP_RANK_OFFSET": "1",
            },
        )
        for index in range(3)
    ]
    for name, value in {
        **group,
        "ASYA_GROUP_MEMBER": "leader",
        "ASYA_GROUP_MEMBER_INDEX": "0",
        "ASYA_GROUP_RANK_OFFSET": "0",
    }.items():
        monkeypatch.setenv(name, value)
    try:
        leader = members.Leader()  # returns once all four ranks have joined
        result = leader({"job": "j", "documents": ["a", "b c", "d e f", "g h i j"]})
        leader.gang.close()
        exits = [worker.wait(timeout=30) for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()

    assert (result["ranks"], result["words_per_rank"]) == (4, [1, 2, 3, 4])
    assert exits == [0, 0, 0]


def test_a_gang_missing_a_rank_does_not_form_and_says_which(gang):
    _, rendezvous = gang
    me = Membership(
        group="eval", instance=0, member="leader", index=0, rank=0, size=3, leader="127.0.0.1"
    )

    with rendezvous.listen("127.0.0.1", 0) as server:
        address = server.getsockname()
        with socket.create_connection(address) as rank_1:
            rank_1.sendall(b'{"rank": 1}\n')
            with pytest.raises(rendezvous.RendezvousError, match=r"ranks \[2\] did not join"):
                rendezvous.lead(me, server, timeout_s=0.5)
            hung_up = rank_1.recv(1)

    assert hung_up == b""  # the rank that had joined is not left waiting


def simulate(capsys, *extra):
    code = asya_main(["admission", "simulate", str(APP / "scenario.yaml"), *extra])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_admission_keeps_the_gang_pending_whole_then_admits_it_whole(capsys):
    first = simulate(capsys, "--cycles", "1")
    settled = simulate(capsys)

    assert first["admitted"] == []
    assert {p["workload"]: p["message"] for p in first["pending"]}["eval[0]"] == (
        "waiting for 1 preempted workload(s) to release quota"
    )
    assert first["preempted"] == [
        {"workload": "bulk-embed", "preemptor": "eval[0]", "reason": "InPool"}
    ]
    assert {a["workload"]: a["podSets"] for a in settled["admitted"]} == {
        "eval[0]": [
            {"name": "leader", "flavor": "h100", "count": 1},
            {"name": "worker", "flavor": "h100", "count": 3},
        ],
        "bulk-embed": [{"name": "replica", "flavor": "h100", "count": 2}],
    }
    assert (settled["pending"], settled["quiescent"]) == ([], True)


def test_the_operator_plans_each_instance_whole_and_gives_every_pod_its_rank(capsys):
    code = operator_main(["plan", str(APP / "cluster.yaml")])
    out = capsys.readouterr().out

    objects = [doc for doc in yaml.safe_load_all(out) if doc]
    decided = yaml.safe_load(
        "\n".join(line[2:] for line in out[out.index("# admitted:") :].splitlines())
    )
    admitted = {a["workload"]: a["podSets"] for a in decided["admitted"]}
    [pending] = decided["pending"]
    assert code == 0
    assert admitted["research/eval[0]"] == [
        {"name": "leader", "flavor": "h100", "count": 1},
        {"name": "worker", "flavor": "h100", "count": 3},
    ]
    assert (pending["workload"], pending["reason"]) == ("research/eval[1]", "InsufficientQuota")
    assert "needs 4" in pending["message"]
    sets = of_kind(objects, "StatefulSet")
    assert {"eval-leader-0", "eval-worker-0"} <= set(sets)
    env = {
        name: {e["name"]: e.get("value") for e in runtime_env(sets[name])}
        for name in ("eval-leader-0", "eval-worker-0")
    }
    assert env["eval-leader-0"]["ASYA_GROUP_RANK_OFFSET"] == "0"
    assert env["eval-worker-0"]["ASYA_GROUP_RANK_OFFSET"] == "1"
    assert env["eval-worker-0"]["ASYA_GROUP_SIZE"] == "4"
    assert env["eval-worker-0"]["ASYA_HANDLER"] == "gang.members:Worker"


def runtime_env(statefulset):
    containers = statefulset["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "runtime")["env"]


def test_render_with_the_overlay_writes_the_actors_as_the_groups_members(tmp_path):
    overlay = str(APP / "values.yaml")

    values, objects = render("gang", "--values-overlay", overlay, tmp_path=tmp_path)

    [group] = of_kind(objects, "ActorGroup").values()
    members = group["spec"]["members"]
    specs = {spec.name: spec for spec in load_app(str(APP)).specs}
    assert values["actors"] == {}
    assert {f"eval-{m['name']}": m["template"]["handler"] for m in members} == {
        name: spec.ref for name, spec in specs.items()
    }
    assert [m["replicas"] for m in members] == [1, 3]
