"""The GPU's own metrics under Triton's names, read from NVML at each scrape.

`nv_gpu_utilization` (0 to 1), `nv_gpu_memory_total_bytes`, `nv_gpu_memory_used_bytes`,
`nv_gpu_power_usage` and `nv_gpu_power_limit` (watts) and `nv_energy_consumption` (joules since
the service started), labelled `gpu_uuid` as Triton labels them, so perf_analyzer's
`--collect-metrics` and Triton dashboards read them. NVML comes from `nvidia-ml-py` (the `gpu`
extra), imported only on a GPU host. Where it is absent or fails there are no series, and a
reading NVML refuses (power on some boards) is left out: metrics never fail a scrape.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger("dmlserve")


def _load_nvml() -> Any:
    return importlib.import_module("pynvml")


class GpuCollector(Collector):
    """NVML's readings of one GPU, as Prometheus gauges."""

    def __init__(self, nvml: Any, handle: Any, uuid: str) -> None:
        self.nvml, self.handle, self.uuid = nvml, handle, uuid
        self.energy_start = self._read(nvml.nvmlDeviceGetTotalEnergyConsumption)

    def _read(self, fn: Callable[[Any], Any]) -> Any:
        try:
            return fn(self.handle)
        except Exception:  # an NVMLError, or a reading this board does not support
            return None

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # the series exist only when NVML answers at scrape time

    def collect(self) -> Iterator[GaugeMetricFamily]:
        nvml = self.nvml
        utilization = self._read(nvml.nvmlDeviceGetUtilizationRates)
        memory = self._read(nvml.nvmlDeviceGetMemoryInfo)
        power = self._read(nvml.nvmlDeviceGetPowerUsage)  # milliwatts
        limit = self._read(nvml.nvmlDeviceGetEnforcedPowerLimit)  # milliwatts
        energy = self._read(nvml.nvmlDeviceGetTotalEnergyConsumption)  # millijoules
        readings = [
            ("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)",
             None if utilization is None else utilization.gpu / 100),
            ("nv_gpu_memory_total_bytes", "GPU total memory, in bytes",
             None if memory is None else memory.total),
            ("nv_gpu_memory_used_bytes", "GPU used memory, in bytes",
             None if memory is None else memory.used),
            ("nv_gpu_power_usage", "GPU power usage in watts",
             None if power is None else power / 1000),
            ("nv_gpu_power_limit", "GPU power management limit in watts",
             None if limit is None else limit / 1000),
            ("nv_energy_consumption", "GPU energy consumption in joules since the service started",
             None if energy is None or self.energy_start is None
             else (energy - self.energy_start) / 1000),
        ]  # fmt: skip
        for name, documentation, value in readings:
            if value is not None:
                family = GaugeMetricFamily(name, documentation, labels=["gpu_uuid"])
                family.add_metric([self.uuid], float(value))
                yield family


def gpu_collector(pci_bus_id: str, load: Callable[[], Any] = _load_nvml) -> GpuCollector | None:
    """The collector of the GPU at `pci_bus_id` (the service's device), or None where NVML
    is not installed or does not answer."""
    try:
        nvml = load()
        nvml.nvmlInit()
        handle = nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
        uuid = nvml.nvmlDeviceGetUUID(handle)
    except Exception as exc:  # ImportError, NVMLError (no driver, no such device), ...
        logger.info("no GPU metrics: NVML does not answer", extra={"reason": str(exc)})
        return None
    return GpuCollector(nvml, handle, uuid if isinstance(uuid, str) else uuid.decode())
