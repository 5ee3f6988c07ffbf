"""The `asya_gpu_*` gauges read the machine's GPUs at scrape time."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from asya.gpu import read_inventory
from asya.metrics import Metrics
from tests.unit.gpu.nvml_double import FakeDevice, FakeNvml


def gauges(metrics: Metrics) -> dict[tuple[str, str], float]:
    text = metrics.exposition().decode()
    return {
        (sample.name, sample.labels["uuid"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("asya_gpu_")
    }


def test_each_device_reports_its_memory_and_utilisation_as_nvml_does_at_each_scrape():
    nvml = FakeNvml([FakeDevice(used=2**30, total=80 * 2**30, utilization=40)])
    metrics = Metrics()
    metrics.watch_gpus(lambda: read_inventory(nvml).devices)

    first = gauges(metrics)
    nvml.devices[0].used = 3 * 2**30
    second = gauges(metrics)

    uuid = nvml.devices[0].uuid
    assert first[("asya_gpu_memory_total_bytes", uuid)] == 80 * 2**30
    assert first[("asya_gpu_memory_used_bytes", uuid)] == 2**30
    assert first[("asya_gpu_utilization_ratio", uuid)] == 0.4
    assert second[("asya_gpu_memory_used_bytes", uuid)] == 3 * 2**30


def test_no_nvml_or_a_failing_reader_gives_no_series_and_never_a_failed_scrape():
    metrics = Metrics()
    assert gauges(metrics) == {}

    def broken():
        raise RuntimeError("NVML went away")

    metrics.watch_gpus(broken)

    assert gauges(metrics) == {}
    assert metrics.exposition().startswith(b"# HELP")
