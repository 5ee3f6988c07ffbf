"""`asya gpus`: a table or JSON of what NVML sees; no GPUs is said, with exit 0."""

from __future__ import annotations

import json

from asya import gpu
from asya.cli import main
from tests.unit.gpu.nvml_double import FakeDevice, FakeNvml


def test_the_table_shows_each_device_with_its_flavor_memory_and_mig(monkeypatch, capsys):
    nvml = FakeNvml([FakeDevice(uuid="GPU-aa", used=1024 * 1024**2, total=81559 * 1024**2)])
    monkeypatch.setattr(gpu, "load_nvml", lambda: nvml)

    code = main(["gpus"])

    assert code == 0
    assert capsys.readouterr().out.splitlines() == [
        "index  uuid    name                   flavor          memory used/total  util  mig",
        "-----  ------  ---------------------  --------------  -----------------  ----  --------",
        "0      GPU-aa  NVIDIA H100 80GB HBM3  h100-80gb-hbm3  1024 / 81559 MiB   7%    disabled",
    ]


def test_json_output_carries_bytes_and_the_reason_when_empty(monkeypatch, capsys):
    monkeypatch.setattr(gpu, "load_nvml", lambda: FakeNvml(init_error="Driver Not Loaded"))

    code = main(["gpus", "-o", "json"])

    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "devices": [],
        "unavailable": "NVML did not start: Driver Not Loaded",
    }


def test_a_machine_without_nvml_says_it_has_no_gpus(monkeypatch, capsys):
    monkeypatch.setattr(gpu, "load_nvml", lambda: "no NVML binding (test)")

    code = main(["gpus"])

    assert code == 0
    assert capsys.readouterr().out == "no GPUs: no NVML binding (test)\n"
