"""The device table (`perf/devices.py`): what every row must satisfy, so a new device is
checked by adding it (docs/guides/adding-a-device.md). Its datasheet totals are checked where
the model uses them: the FP32 peak in test_occupancy.py, the tensor peak in
test_tensor_model.py."""

from __future__ import annotations

import pytest

from deplodock.perf.devices import DEFAULT_DEVICE, DEVICES, model_key_for
from deplodock.perf.model import load_calibration


@pytest.mark.parametrize("key", sorted(DEVICES))
def test_a_gpu_of_that_name_finds_its_model(key: str) -> None:
    """A GPU run (`--profile` on a GPU, `bench.measured_vs_model`) finds the model of the GPU
    it ran on by its name; the row's own name is such a name."""
    device = DEVICES[key]
    assert device.key == key
    assert model_key_for(device.name) == key


@pytest.mark.parametrize("key", sorted(DEVICES))
def test_the_occupancy_limits_fit_the_sm(key: str) -> None:
    device = DEVICES[key]
    limits = device.limits
    assert limits.max_threads_per_sm == 32 * limits.max_warps_per_sm
    assert limits.max_shared_bytes_per_block <= limits.shared_bytes_per_sm
    assert limits.shared_bytes_per_sm <= device.l1_shared_bytes_per_sm


def test_the_default_device_is_the_calibrated_one() -> None:
    assert DEFAULT_DEVICE in DEVICES
    assert load_calibration().device == DEFAULT_DEVICE
