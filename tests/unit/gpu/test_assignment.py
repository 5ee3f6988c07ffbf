"""Which worker of a GPU actor gets which devices: never one device to two workers."""

from __future__ import annotations

import logging

import pytest

from asya import actor
from asya.actor import build_spec
from asya.errors import ActorDefinitionError
from asya.gpu import Inventory, MigMode
from asya.local.gpus import GpuAssigner, GpuMode, code_root, machine_gpus
from tests.unit.gpu.nvml_double import gpu


def spec(name="embed", **options):
    def handler(doc):
        return doc

    handler.__name__ = name.replace("-", "_")
    return build_spec(handler, {"name": name, **options})


def assigner(count, **mig):
    return GpuAssigner(Inventory(devices=tuple(gpu(i, **mig) for i in range(count))))


def test_workers_get_distinct_devices_until_none_is_left_then_wait():
    gpus = assigner(3)
    embed = spec(gpus=1)

    got = [gpus.assign(embed, worker) for worker in range(4)]

    assert [a.environment() if a else None for a in got] == [
        {"CUDA_VISIBLE_DEVICES": "GPU-0"},
        {"CUDA_VISIBLE_DEVICES": "GPU-1"},
        {"CUDA_VISIBLE_DEVICES": "GPU-2"},
        None,
    ]


def test_a_worker_needing_two_gets_two_and_the_next_waits_for_two():
    gpus = assigner(3)
    train = spec("train", gpus=2)

    first = gpus.assign(train, 0)
    second = gpus.assign(train, 1)

    assert first is not None
    assert first.environment() == {"CUDA_VISIBLE_DEVICES": "GPU-0,GPU-1"}
    assert second is None
    assert [d.uuid for d in gpus.free()] == ["GPU-2"]


def test_devices_given_back_go_to_the_next_worker_and_never_twice():
    gpus = assigner(1)
    embed, other = spec(gpus=1), spec("other", gpus=1)
    held = gpus.assign(embed, 0)
    assert held is not None
    assert gpus.assign(other, 0) is None

    gpus.release(held)
    gpus.release(held)  # a second release of the same worker gives nothing back twice
    got = gpus.assign(other, 0)

    assert got is not None
    assert got.environment() == {"CUDA_VISIBLE_DEVICES": "GPU-0"}
    assert gpus.assign(embed, 1) is None


def test_with_cpu_fallback_a_worker_that_finds_no_gpu_runs_with_every_gpu_hidden():
    gpus = assigner(1)
    embed = spec(gpus=1, cpu_fallback=True)

    first, second = gpus.assign(embed, 0), gpus.assign(embed, 1)

    assert first is not None
    assert not first.on_cpu
    assert second is not None
    assert second.on_cpu
    assert second.environment() == {"CUDA_VISIBLE_DEVICES": ""}


def test_a_waiting_actor_is_said_once_and_again_when_it_gets_its_gpus(caplog):
    caplog.set_level(logging.WARNING, logger="asya.local.gpus")
    gpus = assigner(1)
    embed, other = spec(gpus=1), spec("other", gpus=1)
    held = gpus.assign(other, 0)
    assert held is not None

    gpus.assign(embed, 0)
    gpus.assign(embed, 0)
    gpus.release(held)
    gpus.assign(embed, 0)

    lines = [(r.getMessage(), r.actor, r.free, r.held_by) for r in caplog.records]
    assert lines == [
        ("GPU actor waits: not enough GPUs free", "embed", 0, "other/0:0"),
        ("GPU actor no longer waits", "embed", 0, "embed/0:0"),
    ]


def test_mig_enabled_devices_are_never_handed_out():
    gpus = assigner(2, mig=MigMode.ENABLED)

    assert gpus.total == 0
    assert gpus.assign(spec(gpus=1), 0) is None


@pytest.mark.parametrize(
    ("count", "options", "message"),
    [
        (0, {"gpus": 1}, "needs 1 GPU(s) per worker and this machine has none (no driver)"),
        (2, {"gpus": 3}, "needs 3 GPU(s) per worker and this machine has 2;"),
    ],
    ids=["no-gpu-at-all", "fewer-than-one-worker-needs"],
)
def test_an_actor_that_could_only_wait_stops_the_run_at_start_naming_the_fix(
    count, options, message
):
    gpus = GpuAssigner(
        Inventory(devices=tuple(gpu(i) for i in range(count)), unavailable="no driver")
        if count
        else Inventory(unavailable="no driver")
    )

    with pytest.raises(ActorDefinitionError, match="cpu_fallback=True") as raised:
        gpus.check([spec(**options)])

    assert message in str(raised.value)


def test_an_actor_that_may_fall_back_to_cpu_runs_on_a_machine_without_gpus():
    gpus = GpuAssigner(Inventory(unavailable="no driver"))
    embed = spec(gpus=1, cpu_fallback=True)

    gpus.check([embed])
    got = gpus.assign(embed, 0)

    assert got is not None
    assert got.on_cpu


def test_machine_gpus_reads_the_inventory_only_for_gpu_actors_in_assign_mode():
    def unreadable():
        raise AssertionError("the inventory was read")

    cpu_only = machine_gpus([spec(gpus=0)], GpuMode.ASSIGN, env={}, inventory=unreadable)
    in_process = machine_gpus([spec(gpus=1)], GpuMode.IN_PROCESS, env={}, inventory=unreadable)

    assert (cpu_only, in_process) == (None, None)


def test_machine_gpus_refuses_a_gpu_actor_on_a_machine_without_gpus():
    with pytest.raises(ActorDefinitionError, match="actor 'embed' needs 1 GPU"):
        machine_gpus(
            [spec(gpus=1)], GpuMode.ASSIGN, env={}, inventory=lambda: Inventory(unavailable="x")
        )


def test_cpu_fallback_is_only_for_gpu_actors():
    with pytest.raises(ActorDefinitionError, match="cpu_fallback=True applies to GPU actors"):

        @actor(cpu_fallback=True)
        def clean(doc):
            return doc


def test_cpu_fallback_is_recorded_on_the_spec():
    @actor(gpus=1, cpu_fallback=True)
    def embed(doc):
        return doc

    assert embed.__asya_actor__.cpu_fallback is True


def test_another_process_finds_the_actor_module_under_the_folder_above_its_package():
    # This module is tests.unit.gpu.test_assignment, so its root is the repository.
    here = spec()

    assert code_root(here) is not None
    assert (code_root(here) + "/tests/unit/gpu/test_assignment.py").endswith(
        "tests/unit/gpu/test_assignment.py"
    )


def test_a_run_that_allows_cpu_puts_an_actor_the_machine_cannot_serve_on_cpu_silently(caplog):
    gpus = GpuAssigner(Inventory(unavailable="no driver"))
    embed, train = spec(gpus=1), spec("train", gpus=2)

    gpus.check([embed, train], use_cpu=True)
    with caplog.at_level(logging.WARNING, logger="asya.local.gpus"):
        got = [gpus.assign(embed, worker) for worker in range(3)]

    assert gpus.on_cpu == ("embed", "train")
    assert all(a is not None and a.environment() == {"CUDA_VISIBLE_DEVICES": ""} for a in got)
    assert caplog.records == []  # the caller says so once; no line per worker


def test_an_actor_declaring_cpu_fallback_on_a_machine_without_gpus_warns_no_line_per_worker(
    caplog,
):
    gpus = GpuAssigner(Inventory(unavailable="no driver"))
    embed = spec(gpus=1, cpu_fallback=True)

    gpus.check([embed])
    with caplog.at_level(logging.WARNING, logger="asya.local.gpus"):
        got = [gpus.assign(embed, worker) for worker in range(3)]

    assert gpus.on_cpu == ("embed",)
    assert all(a is not None and a.on_cpu for a in got)
    assert caplog.records == []


def test_allowing_cpu_leaves_an_actor_the_machine_can_serve_on_its_gpus():
    gpus = assigner(1)
    embed = spec(gpus=1)

    gpus.check([embed], use_cpu=True)

    assert gpus.on_cpu == ()
    held = gpus.assign(embed, 0)
    assert held is not None
    assert held.environment() == {"CUDA_VISIBLE_DEVICES": "GPU-0"}
    assert gpus.assign(embed, 1) is None  # busy, not missing: it waits


def test_machine_gpus_runs_an_actor_the_machine_cannot_serve_on_cpu_in_assign_or_cpu_mode():
    workers = machine_gpus(
        [spec(gpus=1), spec("clean")],
        GpuMode.ASSIGN_OR_CPU,
        env={},
        inventory=lambda: Inventory(unavailable="no driver"),
    )

    assert workers is not None
    assert workers.assigner.on_cpu == ("embed",)
