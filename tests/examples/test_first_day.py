"""examples/first-day: the data scientist's guide's pipeline. Helpdesk tickets cleaned,
embedded in batches, classified by a service that drops requests (retried), and the unsure
ones sent to a person, each by its own route."""

from __future__ import annotations

import json

from tests.examples.commands import EXAMPLES, asya_dev, render

APP = EXAMPLES / "first-day"
REVIEWED = {"T-105", "T-110", "T-113"}
LABELS = {
    "access": {"T-102", "T-107", "T-111"},
    "hardware": {"T-103", "T-106", "T-112", "T-116"},
    "network": {"T-101", "T-109", "T-115"},
    "software": {"T-104", "T-108", "T-114"},
}


def test_asya_dev_labels_every_ticket_retries_the_dropped_requests_and_routes_the_unsure():
    code, finals, stderr = asya_dev("first-day", "inputs.jsonl")

    by_ticket = {f["payload"]["ticket"]: f for f in finals}
    reviewed = {t for t, f in by_ticket.items() if "human-review" in f["route"]["prev"]}
    inputs = [json.loads(line) for line in (APP / "inputs.jsonl").read_text().splitlines()]
    assert code == 0, stderr
    assert {f["status"]["phase"] for f in finals} == {"succeeded"}
    assert sorted(by_ticket) == sorted(t["ticket"] for t in inputs)
    assert reviewed == REVIEWED
    assert {t for t, f in by_ticket.items() if f["payload"]["needs_review"]} == REVIEWED
    for label, tickets in LABELS.items():
        assert {by_ticket[t]["payload"]["label"] for t in tickets} == {label}
        assert min(by_ticket[t]["payload"]["confidence"] for t in tickets) >= 0.6
    retried = [r for f in finals for r in f["status"]["retries"]]
    assert retried
    assert {(r["actor"], r["type"]) for r in retried} == {("classify", "builtins.ConnectionError")}


def test_render_writes_the_embedder_as_a_batched_gpu_actor_and_the_overlay_its_pool(tmp_path):
    values, objects = render(
        "first-day", "--values-overlay", str(APP / "platform.yaml"), tmp_path=tmp_path
    )

    embed = values["actors"]["embed"]
    assert embed["handler"] == "triage:Embed"
    assert embed["batch"] == {"size": 16, "waitMs": 20}
    assert embed["resources"] == {"gpus": 1, "cpu": "2", "memory": "8Gi"}
    assert values["actorDefaults"] == {"pool": "team-b"}
    assert values["actors"]["classify"]["retry"]["maxAttempts"] == 3
    actors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "AsyncActor"}
    assert sorted(actors) == ["classify", "clean", "embed", "human-review"]
    assert {a["spec"]["pool"] for a in actors.values()} == {"team-b"}
