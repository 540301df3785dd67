"""The GPU's own metrics (Triton's nv_gpu_*): read from NVML, absent wherever NVML is.

Off a GPU host NVML is played by a stand-in with NVML's call signatures (a third-party
library, not this project's code); on a GPU host the real NVML answers through /metrics.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dmlserve.service.gpu_metrics import gpu_collector
from tests.service.conftest import app_client

UUID = "GPU-0b1c2d3e-aaaa-bbbb-cccc-0123456789ab"


class NVMLError(Exception):
    pass


class StandInNVML:
    """NVML's calls the collector makes, answering for one board at one PCI bus id."""

    def __init__(self, power: bool = True) -> None:
        self.power = power
        self.energy = 5_000_000  # millijoules since the driver loaded
        self.initialized = False

    def nvmlInit(self) -> None:
        self.initialized = True

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> str:
        if bus_id != "0000:17:00.0":
            raise NVMLError("Not Found")
        return "handle"

    def nvmlDeviceGetUUID(self, handle: str) -> str:
        return UUID

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> Any:
        return SimpleNamespace(gpu=37, memory=12)

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> Any:
        return SimpleNamespace(total=80 << 30, used=3 << 30, free=77 << 30)

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        if not self.power:
            raise NVMLError("Not Supported")
        return 123_456

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:
        if not self.power:
            raise NVMLError("Not Supported")
        return 700_000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if not self.power:
            raise NVMLError("Not Supported")
        return self.energy


def _scrape(collector: Any) -> dict[str, tuple[dict[str, str], float]]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        s.name: (s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_series_under_tritons_names_and_units() -> None:
    nvml = StandInNVML()
    collector = gpu_collector("0000:17:00.0", load=lambda: nvml)
    assert collector is not None and nvml.initialized
    nvml.energy += 2_500  # 2.5 J since the service started
    series = _scrape(collector)
    labels = {"gpu_uuid": UUID}
    assert series == {
        "nv_gpu_utilization": (labels, 0.37),
        "nv_gpu_memory_total_bytes": (labels, float(80 << 30)),
        "nv_gpu_memory_used_bytes": (labels, float(3 << 30)),
        "nv_gpu_power_usage": (labels, 123.456),
        "nv_gpu_power_limit": (labels, 700.0),
        "nv_energy_consumption": (labels, 2.5),
    }


def test_a_reading_nvml_refuses_is_left_out() -> None:
    collector = gpu_collector("0000:17:00.0", load=lambda: StandInNVML(power=False))
    assert collector is not None
    assert set(_scrape(collector)) == {
        "nv_gpu_utilization",
        "nv_gpu_memory_total_bytes",
        "nv_gpu_memory_used_bytes",
    }


def _missing() -> Any:
    raise ImportError("No module named 'pynvml'")


def _no_driver() -> Any:
    nvml = StandInNVML()

    def init() -> None:
        raise NVMLError("Driver Not Loaded")

    nvml.nvmlInit = init  # type: ignore[method-assign]
    return nvml


@pytest.mark.parametrize(
    "load", [_missing, _no_driver, StandInNVML], ids=["absent", "no-driver", "other-gpu"]
)
def test_no_nvml_means_no_series_and_no_error(load: Any) -> None:
    # StandInNVML answers for another bus id only.
    assert gpu_collector("0000:65:00.0", load=load) is None


async def test_a_cpu_host_exports_no_gpu_series() -> None:
    async with app_client(backend="numpy") as client:
        text = (await client.get("/metrics")).text
    assert "nv_gpu_" not in text and "nv_energy_consumption" not in text


@pytest.mark.gpu
async def test_the_gpu_host_exports_its_device() -> None:
    # nvidia-ml-py comes with the gpu extra, as CuPy does.
    async with app_client(backend="cupy") as client:
        text = (await client.get("/metrics")).text
    names = {s.name for family in text_string_to_metric_families(text) for s in family.samples}
    assert {"nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes"} <= names
