"""`asya-operator plan` with ResourcePools: the objects as before, then the admission what-if
as YAML comments; AsyncActor-only files print exactly what they did."""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml
from asya_operator.cli import main, render
from asya_operator.config import OperatorConfig
from asya_operator.plans.files import Document, read_crs
from asya_operator.plans.objects import plan_objects

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "operator"
POOL = """\
apiVersion: asya.sh/v1alpha1
kind: ResourcePool
metadata:
  name: {name}
spec:
  cohort: {cohort}
  quotas:
    - flavor: h100
      resources:
        - {{name: nvidia.com/gpu, nominal: 2}}
"""
GROUP = """\
apiVersion: asya.sh/v1alpha1
kind: ActorGroup
metadata:
  name: ddp
spec:
  pool: team-a
  members:
    - name: worker
      replicas: 3
      template: {image: img, handler: "ml.ddp:worker", resources: {gpus: 1}}
"""


def plan(capsys, *args):
    code = main(["plan", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, text, name="crs.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_a_file_without_pools_prints_only_the_objects(capsys):
    path = EXAMPLES / "quickstart.yaml"
    bodies = yaml.safe_load_all(path.read_text(encoding="utf-8"))
    crs = read_crs(
        [Document(f"{path}: document {i}", b) for i, b in enumerate(bodies, 1)], "default"
    )

    _, out, _ = plan(capsys, path)

    assert out == render(plan_objects(crs, OperatorConfig()))
    assert "Admission" not in out


def test_the_what_if_follows_the_objects_as_comments_that_yaml_readers_skip(capsys):
    code, out, err = plan(capsys, EXAMPLES / "gpu-teams.yaml")

    assert (code, err) == (0, "")
    objects = [(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(out)]
    assert objects[:3] == [
        ("Deployment", "embed"),
        ("TriggerAuthentication", "embed"),
        ("ScaledObject", "embed"),
    ]
    what_if = out[out.index("# ==== Admission what-if") :]
    assert all(line.startswith("#") for line in what_if.splitlines())
    assert "# 3 admitted, 1 pending, 0 preempted, after 4 cycle(s)\n" in what_if
    assert "#   - {name: trainer, flavor: h100, count: 4}\n" in what_if


def test_a_gang_larger_than_its_pool_is_pending_with_the_engines_reason(capsys, tmp_path):
    path = write(tmp_path, POOL.format(name="team-a", cohort="eng") + "---\n" + GROUP)

    code, out, _ = plan(capsys, path)

    decided = yaml.safe_load(
        "\n".join(line[2:] for line in out[out.index("# admitted:") :].splitlines())
    )
    assert code == 0
    assert decided["admitted"] == []
    assert decided["pending"] == [
        {
            "workload": "default/ddp[0]",
            "kind": "ActorGroup",
            "pool": "team-a",
            "reason": "InsufficientQuota",
            "message": "insufficient quota for nvidia.com/gpu in flavor h100: needs 3, more than"
            " pool team-a can ever have (2)",
        }
    ]


def test_a_pool_defined_twice_exits_2_naming_both_documents(capsys, tmp_path):
    text = (
        POOL.format(name="team-a", cohort="eng")
        + "---\n"
        + POOL.format(name="team-a", cohort="ops")
    )
    path = write(tmp_path, text)

    code, out, err = plan(capsys, path)

    assert (code, out) == (2, "")
    assert err == (
        f"asya-operator plan: {path}: document 2: ResourcePool team-a is already defined in"
        f" {path}: document 1: keep one\n"
    )


def test_a_scenario_the_engine_refuses_exits_2_with_its_reason(capsys, tmp_path):
    cohorts = "".join(
        f"---\napiVersion: asya.sh/v1alpha1\nkind: Cohort\nmetadata: {{name: {a}}}\n"
        f"spec: {{parent: {b}}}\n"
        for a, b in (("eng", "ops"), ("ops", "eng"))
    )
    path = write(tmp_path, POOL.format(name="team-a", cohort="eng") + cohorts)

    code, _, err = plan(capsys, path)

    assert code == 2
    assert err.startswith(
        "asya-operator plan: the admission scenario of these files: cohorts form a loop"
    )


def test_an_elastic_actor_that_waits_says_what_one_replica_needs_first(capsys, tmp_path):
    actor = """\
    apiVersion: asya.sh/v1alpha1
    kind: AsyncActor
    metadata: {name: big}
    spec:
      image: registry.example.com/app:1
      handler: app.text:normalize
      pool: team-a
      resources: {gpus: 3}
      scaling: {minReplicas: 1, maxReplicas: 4}
    """
    path = write(tmp_path, POOL.format(name="team-a", cohort="eng") + "---\n" + actor)

    _code, out, _ = plan(capsys, path)

    decided = yaml.safe_load(
        "\n".join(line[2:] for line in out[out.index("# admitted:") :].splitlines())
    )
    [waiting] = decided["pending"]
    # On the cluster each replica is admitted alone: the engine's 12 is all four together.
    assert waiting["message"] == (
        "one replica needs 3 nvidia.com/gpu (up to 4 replicas); for all of them: insufficient"
        " quota for nvidia.com/gpu in flavor h100: needs 12, more than pool team-a can ever"
        " have (2)"
    )
