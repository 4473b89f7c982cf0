"""Shared memory past the static 48 KiB: a kernel's arrays carved from dynamic shared memory.

A 128 x 128 fp32 GEMM tile with 32-deep chunks, double-buffered, needs 73,728 bytes of slabs:
more than a block's static `__shared__` arrays may hold (ptxas refuses them), within the
99 KiB every GPU of compute capability 8.0 or newer lets a kernel opt in to. The printer then
declares each array with `DD_DYNAMIC_SHARED(T, name, N, offset)` (16-byte aligned offsets),
the `cuda.kernel` carries the byte count its launch asks for, and the host code opts in
(`cudaFuncSetAttribute`) before the launch. Checked: the emitted form, the numerics at every
level against PyTorch with memcheck on the CPU build, that nvcc compiles the whole
translation unit for sm_90 without spills, that a kernel under 48 KiB keeps its static
arrays, and the limits' one home (every modeled GPU allows `MAX_SHARED_BYTES`).
"""

from __future__ import annotations

import functools
import re

import pytest
from xdsl.dialects.builtin import ModuleOp

from deplodock.backend import memcheck
from deplodock.backend.cuda_source import module_to_cuda_source
from deplodock.backend.nvcc import compile_cubin, nvcc_available
from deplodock.dialects import cuda
from deplodock.dialects.hardware import MAX_SHARED_BYTES, MAX_STATIC_SHARED_BYTES
from deplodock.driver import Program, lower_program, run_and_compare
from deplodock.perf.devices import DEVICES
from tests.passes.test_tile_mma import at_tile

LINEAR = "nn.Linear(96, 160, bias=True)(torch.randn(130, 96))"
#: 128 x 128 tiles, BK 32, two slots of both slabs (rows padded by 4): 2 x 256 x 36 x 4 bytes.
DEEP = (
    "tile-block{bm=128 bn=128},tile-thread{fm=8 fn=8},tile-chunk-k{bk=32},tile-stage,"
    "tile-vectorize,tile-pad-shared,tile-multibuffer{depth=2},tile-pipeline,tile-async-copy,"
    "tile-unroll,tile-hoist-invariant,tile-cse"
)
#: The same with 16-deep chunks: 36,864 bytes, static arrays as before.
SHALLOW = DEEP.replace("bk=32", "bk=16")
DECLARATION = re.compile(r"DD_DYNAMIC_SHARED\((\w+), (\w+), (\d+), (\d+)\);")


def at_cuda(pipeline: str) -> Program:
    program = at_tile(LINEAR, pipeline)
    lower_program(program, "cuda")
    return program


@functools.cache
def deep_module() -> ModuleOp:
    return at_cuda(DEEP).module


def only_kernel(module: ModuleOp) -> cuda.KernelOp:
    (kernel,) = [op for op in module.ops if isinstance(op, cuda.KernelOp)]
    return kernel


def test_arrays_past_the_static_limit_are_dynamic_shared_memory():
    kernel = only_kernel(deep_module())
    source = kernel.source.data
    declared = DECLARATION.findall(source)
    assert len(declared) == 2 and "__shared__" not in source
    offset = 0
    for ctype, _, elements, at in declared:  # one after the other, on 16-byte boundaries
        assert ctype == "float" and int(at) == offset and offset % 16 == 0
        offset += -(-int(elements) * 4 // 16) * 16
    assert kernel.smem.value.data == offset == 73728
    assert MAX_STATIC_SHARED_BYTES < offset <= MAX_SHARED_BYTES
    assert "cpu_simt.h" in kernel.header_names


def test_the_host_code_opts_in_once_before_the_launch():
    source = module_to_cuda_source(deep_module())
    name = only_kernel(deep_module()).sym_name.data
    opt_in = (
        f"DEPLODOCK_CHECK(cudaFuncSetAttribute({name}, "
        "cudaFuncAttributeMaxDynamicSharedMemorySize, 73728));"
    )
    assert source.count(opt_in) == 1
    assert source.index(opt_in) < source.index(f"{name}<<<4, 256, 73728>>>(")


def test_under_the_static_limit_arrays_stay_static():
    kernel = only_kernel(at_cuda(SHALLOW).module)
    assert kernel.smem.value.data == 0
    assert "DD_DYNAMIC_SHARED" not in kernel.source.data
    assert kernel.source.data.count("__shared__ __align__(16) float") == 2
    assert "cudaFuncSetAttribute" not in module_to_cuda_source(at_cuda(SHALLOW).module)


@pytest.mark.parametrize("stage", ["tile", "kernel", "cuda"])
def test_the_deep_schedule_matches_pytorch(stage: str):
    program = at_tile(LINEAR, DEEP)
    if stage != "tile":
        lower_program(program, stage)
    report = run_and_compare(program, seed=2, memcheck=stage == "cuda")
    assert report.ok, f"{stage}: {report.summary()}"


def test_memcheck_checks_a_dynamic_array_as_a_shared_one():
    line = "  DD_DYNAMIC_SHARED(float, x_a_s, 9216, 36864);"
    assert memcheck.instrument(line) == (
        '  __shared__ deplodock_simt::SharedArray<float, 9216> x_a_s{"x_a_s"};'
    )
    with pytest.raises(memcheck.MemcheckSourceError, match=r"kernel.cu:1: .*with literals"):
        memcheck.instrument("  DD_DYNAMIC_SHARED(float, x_a_s, n, 0);")


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH")
def test_nvcc_compiles_the_translation_unit_for_sm_90():
    source = module_to_cuda_source(deep_module())
    (resources,) = compile_cubin(source, arch="sm_90").kernels.values()
    assert not resources.spills
    assert resources.shared_bytes == 0  # no static arrays: all of it is dynamic


def test_every_modeled_gpu_allows_the_opt_in_limit():
    for device in DEVICES.values():
        assert MAX_SHARED_BYTES <= device.limits.max_shared_bytes_per_block, device.key
