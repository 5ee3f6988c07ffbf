"""The inventory reads what NVML reports, and is empty, with the reason, where NVML is absent."""

from __future__ import annotations

import pytest

from asya.gpu import GpuDevice, Inventory, MigMode, flavor_of, load_nvml, read_inventory
from tests.unit.gpu.nvml_double import FakeDevice, FakeNvml


def test_each_device_is_listed_with_its_index_uuid_memory_utilisation_mig_and_flavor():
    nvml = FakeNvml(
        [
            FakeDevice(name="NVIDIA H100 80GB HBM3", uuid="GPU-aa", used=2048, total=4096),
            FakeDevice(name="NVIDIA A100-SXM4-80GB", uuid="GPU-bb", mig=1, utilization=None),
        ]
    )

    inventory = read_inventory(nvml)

    assert inventory == Inventory(
        devices=(
            GpuDevice(
                index=0,
                uuid="GPU-aa",
                name="NVIDIA H100 80GB HBM3",
                flavor="h100-80gb-hbm3",
                memory_total_bytes=4096,
                memory_used_bytes=2048,
                utilization_percent=7,
                mig=MigMode.DISABLED,
            ),
            GpuDevice(
                index=1,
                uuid="GPU-bb",
                name="NVIDIA A100-SXM4-80GB",
                flavor="a100-sxm4-80gb",
                memory_total_bytes=80 * 1024**3,
                memory_used_bytes=1024**3,
                utilization_percent=None,
                mig=MigMode.ENABLED,
            ),
        )
    )
    assert (nvml.started, nvml.shut_down) == (1, 1)


def test_a_device_without_mig_says_unsupported_and_older_bindings_bytes_are_decoded():
    nvml = FakeNvml([FakeDevice(name="Tesla T4", uuid="GPU-t4", mig=None)], names_as_bytes=True)

    [device] = read_inventory(nvml).devices

    assert (device.name, device.uuid, device.mig) == ("Tesla T4", "GPU-t4", MigMode.UNSUPPORTED)
    assert device.is_assignable


def test_a_mig_enabled_device_cannot_be_assigned_whole():
    [device] = read_inventory(FakeNvml([FakeDevice(mig=1)])).devices

    assert not device.is_assignable


def test_nvml_that_does_not_start_is_an_empty_inventory_saying_why():
    nvml = FakeNvml([FakeDevice()], init_error="NVML Shared Library Not Found")

    inventory = read_inventory(nvml)

    assert inventory == Inventory(unavailable="NVML did not start: NVML Shared Library Not Found")


def test_nvml_failing_while_listing_is_an_empty_inventory_and_nvml_is_shut_down():
    nvml = FakeNvml([FakeDevice()], count_error="GPU is lost")

    inventory = read_inventory(nvml)

    assert inventory == Inventory(unavailable="NVML failed while listing devices: GPU is lost")
    assert nvml.shut_down == 1


def test_no_pynvml_module_is_an_empty_inventory_naming_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import raises ImportError

    inventory = read_inventory()

    assert inventory.devices == ()
    assert inventory.unavailable is not None
    assert "pip install 'asya[gpu]'" in inventory.unavailable


def test_load_nvml_names_the_missing_binding(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)

    assert isinstance(load_nvml(), str)


@pytest.mark.parametrize(
    ("product", "flavor"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"),
        ("Tesla T4", "tesla-t4"),
        ("NVIDIA", "nvidia"),
        ("--", "gpu"),
        ("X" * 80, "x" * 63),
    ],
    ids=["h100", "a100", "geforce", "tesla", "vendor-only", "nothing-left", "long"],
)
def test_a_product_name_maps_to_a_dns_label_flavor(product, flavor):
    assert flavor_of(product) == flavor
