"""GPUs as data: the public specifications the performance model needs, one record per device.

The model never asks "is this an H100?"; it reads the fields below. A field is a published
figure (the source is in the comment next to it) or, where vendors publish nothing, a
microbenchmark figure marked as an estimate. Peaks are derived from units x clock where the
datasheet allows, so a test can check them against the datasheet's own total.

Occupancy limits are per compute capability (CUDA C++ Programming Guide, "Features and
Technical Specifications", table "Technical Specifications per Compute Capability").

A `Device` here is a GPU as its datasheet describes it; none need be present. The GPU this
machine has, if any, is `backend/device.py`'s `DeviceInfo` (docs/architecture.md, "Words").
Adding one: docs/guides/adding-a-device.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

KIB = 1024
MIB = 1024 * 1024


@dataclass(frozen=True)
class OccupancyLimits:
    """What one SM can hold at once, by compute capability."""

    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    #: Registers are allocated per warp in units of this many (sm_50 and later: 256).
    register_allocation_unit: int = 256
    shared_bytes_per_sm: int = 228 * KIB
    max_shared_bytes_per_block: int = 227 * KIB
    #: Shared memory is allocated in units of this many bytes ...
    shared_allocation_unit: int = 128
    #: ... plus this much per block, reserved by the driver (sm_80 and later: 1 KiB).
    shared_reserved_per_block: int = 1 * KIB


@dataclass(frozen=True)
class Device:
    """One GPU: units, clock, memory system and occupancy limits."""

    key: str
    name: str
    capability: tuple[int, int]
    sm_count: int
    boost_clock_ghz: float
    #: FP32 lanes per SM (an FFMA warp-instruction takes 32 / this many cycles).
    fp32_lanes_per_sm: int
    int32_lanes_per_sm: int
    #: Special-function (MUFU: exp2, rsqrt, ...) lanes per SM.
    sfu_lanes_per_sm: int
    warp_schedulers_per_sm: int
    #: Dense tensor-core peak for bf16 inputs with fp32 accumulation, TFLOP/s (the datasheet's
    #: figure, reached with the best instruction the part has: `wgmma` on sm_90).
    bf16_tensor_tflops: float
    #: Dense bf16/f16 flops (fp32 accumulation) one SM's tensor cores deliver per cycle through
    #: `mma.sync` (m16n8k16), the only tensor-core instruction the kernel dialect emits.
    mma_sync_flops_per_clock_per_sm: int
    dram_bytes_per_s: float
    l2_bytes: int
    #: Sustained L2 bandwidth (an estimate: vendors do not publish it).
    l2_bytes_per_s: float
    #: Unified L1/shared capacity per SM; L1 is what the shared carve-out leaves.
    l1_shared_bytes_per_sm: int
    #: Latency of an L2 hit, ns (a microbenchmark estimate).
    l2_latency_ns: float
    limits: OccupancyLimits
    #: Bytes of shared memory each SM serves per cycle (32 banks x 4 bytes).
    shared_bytes_per_cycle: int = 128

    @property
    def fp32_flops_per_s(self) -> float:
        """FP32 FMA peak: 2 flops per lane per cycle at the boost clock."""
        return 2 * self.fp32_lanes_per_sm * self.sm_count * self.boost_clock_ghz * 1e9

    @property
    def tensor_flops_per_s(self) -> float:
        """The datasheet's dense bf16 tensor-core peak: the speed of light of tensor-core math,
        whichever instruction a kernel uses to get there."""
        return self.bf16_tensor_tflops * 1e12

    @property
    def mma_sync_flops_per_s(self) -> float:
        """The tensor-core peak through `mma.sync`: its rate per SM x SMs x boost clock (the
        datasheet peak where `mma.sync` is the part's best instruction; on Hopper, where only
        `wgmma` reaches the peak, well below it)."""
        return self.mma_sync_flops_per_clock_per_sm * self.sm_count * self.boost_clock_ghz * 1e9

    @property
    def arch(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"


#: sm_80 and sm_90: 2048 threads, 64 warps, 32 blocks per SM.
_SM80 = OccupancyLimits(
    2048, 64, 32, shared_bytes_per_sm=164 * KIB, max_shared_bytes_per_block=163 * KIB
)
_SM90 = OccupancyLimits(
    2048, 64, 32, shared_bytes_per_sm=228 * KIB, max_shared_bytes_per_block=227 * KIB
)
#: sm_86: 1536 threads, 48 warps, 16 blocks per SM, 100 KiB shared.
_SM86 = OccupancyLimits(
    1536, 48, 16, shared_bytes_per_sm=100 * KIB, max_shared_bytes_per_block=99 * KIB
)
#: sm_120: 1536 threads, 48 warps, 32 blocks per SM, 128 KiB shared (99 KiB per block).
_SM120 = OccupancyLimits(
    1536, 48, 32, shared_bytes_per_sm=128 * KIB, max_shared_bytes_per_block=99 * KIB
)

DEVICES: dict[str, Device] = {
    # NVIDIA H100 Tensor Core GPU datasheet / Hopper architecture whitepaper (SXM5):
    # 132 SMs, 128 FP32 lanes per SM, 1.98 GHz boost -> 66.9 TFLOP/s FP32; 989 TFLOP/s dense
    # BF16; 3.35 TB/s HBM3; 50 MB L2; 256 KB L1/shared per SM. L2 bandwidth (about 5.5 TB/s)
    # and hit latency: estimates from public microbenchmarks, not datasheet figures.
    # Tensor cores: the 989 TFLOP/s are 4096 dense BF16 flops/clk/SM (132 SMs at the 1.83 GHz
    # NVIDIA quotes tensor peaks at), and only `wgmma` reaches them. The legacy `mma.sync`
    # path tops out near 63% of that peak: "the ~63-65%-of-peak mma.sync instruction
    # ceiling" (Luo et al., "Dissecting the NVIDIA Hopper Architecture through
    # Microbenchmarking and Multiple Level Analysis", arXiv:2501.12084, as cited in
    # waynehacking8/blackwell-tensorcore-kernels results/mma_ablation.md; the paper's own table
    # was not readable here). An estimate, not a datasheet figure, to check on a GPU: 5/8 of
    # the per-SM peak, 2560 flops/clk/SM (669 TFLOP/s at the 1.98 GHz boost clock this model
    # runs every pipe at).
    "h100": Device(
        key="h100",
        name="NVIDIA H100 SXM5 80GB (modeled)",
        capability=(9, 0),
        sm_count=132,
        boost_clock_ghz=1.98,
        fp32_lanes_per_sm=128,
        int32_lanes_per_sm=64,
        sfu_lanes_per_sm=16,
        warp_schedulers_per_sm=4,
        bf16_tensor_tflops=989.0,
        mma_sync_flops_per_clock_per_sm=2560,
        dram_bytes_per_s=3.35e12,
        l2_bytes=50 * MIB,
        l2_bytes_per_s=5.5e12,
        l1_shared_bytes_per_sm=256 * KIB,
        l2_latency_ns=260.0,
        limits=_SM90,
    ),
    # NVIDIA A100 Tensor Core GPU datasheet / Ampere GA100 whitepaper (SXM4 40GB): 108 SMs,
    # 64 FP32 lanes per SM, 1.41 GHz -> 19.5 TFLOP/s FP32; 312 TFLOP/s BF16; 1,555 GB/s
    # HBM2; 40 MB L2; 192 KB L1/shared per SM. L2 bandwidth and hit latency: microbenchmark
    # estimates. Tensor cores: 4 per SM x 256 dense FP16/BF16 FMA per clock (GA100
    # whitepaper) = 2048 flops/clk/SM -> 312 TFLOP/s; `mma.sync` is Ampere's native tensor
    # instruction, so it reaches the whole peak.
    "a100": Device(
        key="a100",
        name="NVIDIA A100 SXM4 40GB (modeled)",
        capability=(8, 0),
        sm_count=108,
        boost_clock_ghz=1.41,
        fp32_lanes_per_sm=64,
        int32_lanes_per_sm=64,
        sfu_lanes_per_sm=16,
        warp_schedulers_per_sm=4,
        bf16_tensor_tflops=312.0,
        mma_sync_flops_per_clock_per_sm=2048,
        dram_bytes_per_s=1.555e12,
        l2_bytes=40 * MIB,
        l2_bytes_per_s=4.0e12,
        l1_shared_bytes_per_sm=192 * KIB,
        l2_latency_ns=200.0,
        limits=_SM80,
    ),
    # NVIDIA RTX A6000 datasheet / Ampere GA102 whitepaper: 84 SMs, 128 FP32 lanes per SM
    # (half shared with INT32), 1.80 GHz boost -> 38.7 TFLOP/s; 768 GB/s GDDR6; 6 MB L2;
    # 128 KB L1/shared per SM. L2 bandwidth and hit latency: microbenchmark estimates.
    # Tensor cores: 154.8 TFLOP/s dense FP16/BF16 with FP32 accumulate (datasheet; the
    # professional GA102 runs FP32 accumulation at full rate, the GeForce RTX 3090 at half)
    # = 1024 flops/clk/SM, through `mma.sync`.
    "a6000": Device(
        key="a6000",
        name="NVIDIA RTX A6000 (modeled)",
        capability=(8, 6),
        sm_count=84,
        boost_clock_ghz=1.80,
        fp32_lanes_per_sm=128,
        int32_lanes_per_sm=64,
        sfu_lanes_per_sm=16,
        warp_schedulers_per_sm=4,
        bf16_tensor_tflops=155.0,
        mma_sync_flops_per_clock_per_sm=1024,
        dram_bytes_per_s=768e9,
        l2_bytes=6 * MIB,
        l2_bytes_per_s=2.0e12,
        l1_shared_bytes_per_sm=128 * KIB,
        l2_latency_ns=220.0,
        limits=_SM86,
    ),
    # NVIDIA RTX Blackwell GPU architecture whitepaper (GeForce RTX 5090): 170 SMs, 128 FP32
    # lanes per SM, 2.41 GHz boost -> 104.8 TFLOP/s; 209.5 TFLOP/s dense BF16 (fp32
    # accumulate); 1,792 GB/s GDDR7; 96 MB L2; 128 KB L1/shared per SM. L2 bandwidth:
    # an estimate. Tensor cores: a GeForce part accumulates in FP32 at half the FP16-accumulate
    # rate (419 dense, 838 sparse TFLOP/s), so 209.5 TFLOP/s = 512 flops/clk/SM at 2.407 GHz;
    # sm_120 has no `wgmma`, `mma.sync` is its tensor instruction (a microbenchmark on the
    # full-rate RTX PRO 6000, same GB202, measures 1024: waynehacking8/blackwell-tensorcore-
    # kernels results/mma_rate_probe.csv).
    "rtx5090": Device(
        key="rtx5090",
        name="NVIDIA GeForce RTX 5090 (modeled)",
        capability=(12, 0),
        sm_count=170,
        boost_clock_ghz=2.41,
        fp32_lanes_per_sm=128,
        int32_lanes_per_sm=64,
        sfu_lanes_per_sm=16,
        warp_schedulers_per_sm=4,
        bf16_tensor_tflops=209.5,
        mma_sync_flops_per_clock_per_sm=512,
        dram_bytes_per_s=1.792e12,
        l2_bytes=96 * MIB,
        l2_bytes_per_s=5.0e12,
        l1_shared_bytes_per_sm=128 * KIB,
        l2_latency_ns=230.0,
        limits=_SM120,
    ),
}

# NVIDIA H200 Tensor Core GPU datasheet (SXM): the H100's GH100 compute (132 SMs at 1.98 GHz,
# 989 TFLOP/s dense BF16, the same `mma.sync` rate) with 4.8 TB/s HBM3e. The L2 size is what
# PyTorch reports on a lent H200 (60 MB); its bandwidth and latency are the H100's estimates.
# The one H200 run's own clock and launch cost (`calibration.json`, `h200@latency`) model
# that run's rows only (the model against them: bench/results/model-vs-h200-*).
DEVICES["h200"] = replace(
    DEVICES["h100"],
    key="h200",
    name="NVIDIA H200 SXM 141GB (modeled)",
    dram_bytes_per_s=4.8e12,
    l2_bytes=60 * MIB,
)

#: The device a tool models when none is named (`run --profile`, `tune --model`, `--tuned-for`,
#: the explorer): the one whose published measurements the model's constants were fitted on
#: (`calibration.json`), so what a user sees first is the best-calibrated figure.
DEFAULT_DEVICE = "h100"


def known_devices() -> str:
    """The keys of `DEVICES`, as help texts and errors list them (`h100, a100, ...`)."""
    return ", ".join(DEVICES)


#: A fragment of a real device's name -> its model here (how a GPU run finds its model).
_NAME_FRAGMENTS = (
    ("H100", "h100"),
    ("H200", "h200"),
    ("A100", "a100"),
    ("A6000", "a6000"),
    ("5090", "rtx5090"),
)


def model_key_for(device_name: str) -> str | None:
    """The model of a real GPU called `device_name` ("NVIDIA H100 80GB HBM3" -> "h100")."""
    for fragment, key in _NAME_FRAGMENTS:
        if fragment in device_name:
            return key
    return None


class UnknownDevice(ValueError):
    """A `--model` name that is not in `DEVICES`."""


def device_model(key: str) -> Device:
    """The device called `key` (a key of `DEVICES`, any case)."""
    try:
        return DEVICES[key.lower()]
    except KeyError:
        raise UnknownDevice(f"unknown device model {key!r} (known: {known_devices()})") from None
