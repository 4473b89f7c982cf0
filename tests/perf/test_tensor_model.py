"""The model sees tensor-core work: a `kernel.mma_sync` is one `mma` warp-instruction of 4096
flops, timed by the `tensor` term; a bf16 kernel's % SOL is against the tensor peak, not the
FP32 one."""

from __future__ import annotations

import pytest

from deplodock.backend.cost import kernel_cost
from deplodock.dialects import kernel
from deplodock.perf.devices import DEVICES, device_model
from deplodock.perf.instructions import MMA_FLOPS, fused_multiplies, op_cost
from deplodock.perf.model import TERMS, Constants, KernelEstimate, model_kernel
from deplodock.perf.sol import dtype_of_types
from deplodock.perf.trace import trace_kernel
from tests.helpers import parse
from tests.perf import kernels as K

H100 = device_model("h100")
#: The model's constants, fixed here so the formulas below do not depend on a calibration.
CONSTANTS = Constants()
CLOCK = H100.boost_clock_ghz * 1e9 * CONSTANTS.clock_fraction
#: 2 blocks of 4 warps on each of the H100's 132 SMs.
GRID, WARPS = 264, 4


def kernel_of(text: str) -> kernel.FuncOp:
    module = parse(text)
    return next(op for op in module.ops if isinstance(op, kernel.FuncOp))


def modeled(text: str, device_key: str = "h100") -> KernelEstimate:
    fn = kernel_of(text)
    device = device_model(device_key)
    dtype = dtype_of_types([arg.type for arg in fn.body.block.args])
    flops = kernel_cost(fn).flops
    return model_kernel(trace_kernel(fn), device, 64, flops, CONSTANTS, "ptxas", dtype)


def test_an_mma_is_one_tensor_instruction_of_4096_flops():
    fn = kernel_of(K.mma_loop(GRID, 64))
    (mma,) = (op for op in fn.walk() if isinstance(op, kernel.MmaSyncOp))
    assert op_cost(mma, fused_multiplies(fn.walk())) == {"mma": 1}  # operand packing is free
    assert MMA_FLOPS == 2 * 16 * 8 * 16 == 4096
    mmas = GRID * WARPS * 64
    assert trace_kernel(fn).instructions["mma"] == mmas
    cost = kernel_cost(fn)
    assert cost.exact and cost.flops == mmas * 4096


def test_tensor_term_scales_with_the_mma_count():
    short, long = modeled(K.mma_loop(GRID, 64)), modeled(K.mma_loop(GRID, 128))
    assert long.terms_us["tensor"] == pytest.approx(2 * short.terms_us["tensor"])
    # as the FP32 term is: the busiest SM's instructions (2 blocks of 4 warps) at the SM's rate
    per_sm = 2 * WARPS * 64 * MMA_FLOPS
    expected = per_sm / (H100.mma_sync_flops_per_clock_per_sm * CLOCK) * 1e6
    assert short.terms_us["tensor"] == pytest.approx(expected)


def test_a_wave_tail_pays_a_whole_round_of_mma():
    whole = modeled(K.mma_loop(GRID, 64))
    tail = modeled(K.mma_loop(GRID + 1, 64))  # one block more: a third block on one SM
    assert tail.terms_us["tensor"] == pytest.approx(1.5 * whole.terms_us["tensor"])


def test_an_mma_takes_one_issue_slot():
    estimate = modeled(K.mma_loop(GRID, 64))
    slots = sum(estimate.counters.instructions.values()) / GRID * 2  # the busiest SM's
    rate = H100.warp_schedulers_per_sm * CLOCK * CONSTANTS.issue_efficiency
    assert estimate.terms_us["issue"] == pytest.approx(slots / rate * 1e6)


def test_a_long_mma_loop_is_tensor_bound():
    estimate = modeled(K.mma_loop(GRID, 1024))
    assert estimate.limiter == "tensor"
    assert set(estimate.terms_us) == set(TERMS)


def test_sol_measures_tensor_flops_against_the_tensor_peak():
    estimate = modeled(K.mma_loop(GRID, 1024))
    assert estimate.flops == GRID * WARPS * 1024 * 4096
    assert estimate.ideal_us == pytest.approx(estimate.flops / H100.tensor_flops_per_s * 1e6)
    # mma.sync reaches 5/8 of Hopper's per-SM tensor rate, so even the busy-time ratio stays
    # below that, where the FP32 peak (15x lower) would put it far above 100%
    assert estimate.ideal_us < estimate.busy_us
    ratio = H100.mma_sync_flops_per_s / H100.tensor_flops_per_s
    assert 0.5 < estimate.busy_sol_fraction < ratio
    # the one % SOL counts the launch too
    assert estimate.sol_fraction == pytest.approx(estimate.ideal_us / estimate.time_us)
    assert estimate.sol_fraction < estimate.busy_sol_fraction


def test_a100_mma_sync_runs_at_its_tensor_peak():
    """Ampere's native tensor instruction: at the full clock the tensor term is the ideal."""
    estimate = modeled(K.mma_loop(216, 1024), "a100")  # 2 blocks on each of 108 SMs
    assert estimate.limiter == "tensor"
    at_boost = estimate.terms_us["tensor"] * CONSTANTS.clock_fraction
    assert at_boost == pytest.approx(estimate.ideal_us, rel=1e-3)


def test_a_bf16_kernel_counts_every_flop_at_the_tensor_peak():
    """The ideal is the dtype's fastest dense path: for bf16 every useful flop, the FP32
    pipe's included, counts at the tensor peak; the model still times the FMAs on their own
    pipe, which binds."""
    estimate = modeled(K.mma_loop(GRID, 1024, scalar_fmas=40))
    tensor_flops = GRID * WARPS * 1024 * 4096
    scalar_flops = estimate.flops - tensor_flops
    assert scalar_flops == GRID * WARPS * 32 * 1024 * 40 * 2  # 40 FFMAs per lane
    assert estimate.ideal_us == pytest.approx(estimate.flops / H100.tensor_flops_per_s * 1e6)
    assert estimate.limiter in ("fp32", "issue")
    assert estimate.sol_fraction < 0.2


def test_a_kernel_without_mma_is_modeled_as_before():
    """No mma: the tensor term is zero (it adds nothing to the overlapped busy time) and the
    ideal is the old one, DRAM bytes or flops at the FP32 peak."""
    estimate = modeled(K.fma_loop(1056))
    assert estimate.counters.instructions["mma"] == 0
    assert estimate.terms_us["tensor"] == 0
    fp32_time = estimate.flops / H100.fp32_flops_per_s * 1e6
    assert estimate.ideal_us == pytest.approx(fp32_time)


@pytest.mark.parametrize("key", sorted(DEVICES))
def test_mma_sync_never_beats_the_datasheet_tensor_peak(key):
    """Where `mma.sync` is the part's best tensor instruction its rate is the datasheet peak;
    on Hopper it is 5/8 of the 4096 flops/clk/SM that `wgmma` reaches. (The RTX 5090's 209.5
    TFLOP/s are quoted at 2.407 GHz; the table rounds its boost clock to 2.41.)"""
    device = DEVICES[key]
    ratio = device.mma_sync_flops_per_s / device.tensor_flops_per_s
    if device.capability == (9, 0):
        assert device.mma_sync_flops_per_clock_per_sm == 4096 * 5 // 8
        assert ratio == pytest.approx(0.68, abs=0.01)  # 5/8 at 1.98 GHz over 4096 at 1.83
    else:
        assert ratio == pytest.approx(1.0, abs=0.002)
