"""A program's kernels modeled and ranked (`run --profile --model`'s table)."""

from __future__ import annotations

from deplodock.dialects import kernel
from deplodock.perf.devices import device_model, model_key_for
from deplodock.perf.profile import estimate_registers, format_model_table, model_program
from tests.helpers import parse
from tests.perf import kernels as K

H100 = device_model("h100")


def test_kernels_are_ranked_and_summed():
    module = parse(K.copy_2d(1024))
    estimate = model_program(module, H100, {"copy": 40})
    ((row, launches),) = estimate.kernels
    assert launches == 1 and row.occupancy.registers == 40
    assert estimate.registers_source == "ptxas"
    assert estimate.total_us == row.time_us
    table = format_model_table(estimate)
    assert table.startswith("profile: MODELED on NVIDIA H100")
    assert "registers: ptxas" in table


def test_registers_are_estimated_without_ptxas_and_the_table_says_so():
    module = parse(K.matmul_register_tiled(64))
    estimate = model_program(module, H100, None)
    assert "estimated" in estimate.registers_source
    assert "registers: estimated from the IR" in format_model_table(estimate)
    fn = next(op for op in module.ops if isinstance(op, kernel.FuncOp))
    # sixteen accumulators and eight loads per iteration: more than the base estimate
    assert estimate_registers(fn) > 32


def test_real_device_names_find_their_model():
    assert model_key_for("NVIDIA H100 80GB HBM3") == "h100"
    assert model_key_for("NVIDIA A100-SXM4-40GB") == "a100"
    assert model_key_for("NVIDIA RTX A6000") == "a6000"
    assert model_key_for("NVIDIA GeForce RTX 5090") == "rtx5090"
    assert model_key_for("Tesla T4") is None
