"""The cubin cache: one nvcc run per (source, arch, flags, nvcc version), resources kept.

Most tests use a fake `nvcc` (a Python script that logs each compile) so they count exactly
how often the compiler ran; the last ones use the real nvcc when it is on PATH.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from xdsl.parser import Parser

from deplodock.backend import nvcc
from deplodock.backend.build import (
    build_cubin,
    build_module,
    cache_key,
    kernels_source,
)
from deplodock.backend.nvcc import NvccError, arch_for, needs_arch_specific, nvcc_release
from deplodock.dialects import make_context
from deplodock.passes.convert_kernel_to_cuda import ConvertKernelToCudaPass

INPUTS = Path(__file__).resolve().parent / "inputs"

FAKE_NVCC = """\
#!{python}
import re, sys
from pathlib import Path
args = sys.argv[1:]
if args == ["--version"]:
    print("nvcc: NVIDIA (R) Cuda compiler driver")
    print("Build cuda_{version}.r0/compiler.0_0")
    sys.exit(0)
with open({log!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
src = Path(args[-1]).read_text()
if "nope" in src:
    print("kernels.cu(1): error: identifier \\"nope\\" is undefined", file=sys.stderr)
    sys.exit(1)
out = args[args.index("-o") + 1]
Path(out).write_bytes(b"CUBIN:" + " ".join(args[:-3]).encode())
for name in re.findall(r"__global__\\s+void\\s+(?:__launch_bounds__\\(\\d+\\)\\s+)?(\\w+)", src):
    print(f"ptxas info    : Compiling entry function '{{name}}' for 'sm_90'", file=sys.stderr)
    print(f"ptxas info    : Function properties for {{name}}", file=sys.stderr)
    print("    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads", file=sys.stderr)
    print("ptxas info    : Used 40 registers, 128 bytes smem, 360 bytes cmem[0]", file=sys.stderr)
"""

SOURCE = 'extern "C" __global__ void twice(const float* x, float* y) { y[0] = 2 * x[0]; }\n'


def make_fake_nvcc(directory: Path, version: str) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "calls.log"
    script = directory / "nvcc"
    script.write_text(FAKE_NVCC.format(python=sys.executable, version=version, log=str(log)))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def calls(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def fake_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script, log = make_fake_nvcc(tmp_path / "v1", "12.8")
    monkeypatch.setenv("DEPLODOCK_NVCC", str(script))
    return log


def test_same_source_compiles_once(fake_nvcc: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = build_cubin(SOURCE, "sm_90", directory=cache)
    second = build_cubin(SOURCE, "sm_90", directory=cache)
    assert calls(fake_nvcc) == 1
    assert (first.cached, second.cached) == (False, True)
    assert second.cubin == first.cubin and second.key == first.key
    res = second.kernels["twice"]
    assert (res.registers, res.shared_bytes, res.spill_stores, res.spill_loads) == (40, 128, 4, 4)
    assert res.spills and second.nvcc_version.endswith("cuda_12.8.r0/compiler.0_0")


def test_changed_source_arch_or_flags_make_new_entries(fake_nvcc: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    keys = {
        build_cubin(SOURCE, "sm_90", directory=cache).key,
        build_cubin(SOURCE, "sm_90", ("-O3",), directory=cache).key,
        build_cubin(SOURCE, "sm_90a", directory=cache).key,
        build_cubin(SOURCE.replace("2 *", "3 *"), "sm_90", directory=cache).key,
    }
    assert len(keys) == 4 and calls(fake_nvcc) == 4
    assert len(list(cache.glob("*.cubin"))) == 4
    # the flags reach nvcc
    assert "-arch=sm_90a" in fake_nvcc.read_text()


def test_nvcc_version_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    old, old_log = make_fake_nvcc(tmp_path / "old", "12.8")
    new, new_log = make_fake_nvcc(tmp_path / "new", "13.0")
    monkeypatch.setenv("DEPLODOCK_NVCC", str(old))
    a = build_cubin(SOURCE, "sm_90", directory=cache)
    monkeypatch.setenv("DEPLODOCK_NVCC", str(new))
    b = build_cubin(SOURCE, "sm_90", directory=cache)
    assert a.key != b.key and not b.cached
    assert calls(old_log) == calls(new_log) == 1
    assert cache_key(SOURCE, "sm_90", (), "x") != cache_key(SOURCE, "sm_90", (), "y")


def test_damaged_entry_is_rebuilt(fake_nvcc: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    build = build_cubin(SOURCE, "sm_90", directory=cache)
    (cache / f"{build.key}.json").write_text("{not json")
    again = build_cubin(SOURCE, "sm_90", directory=cache)
    assert not again.cached and calls(fake_nvcc) == 2
    assert build_cubin(SOURCE, "sm_90", directory=cache).cached


def test_errors_are_not_cached(fake_nvcc: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    bad = 'extern "C" __global__ void k(float* y) { y[0] = nope; }'
    for _ in range(2):
        with pytest.raises(NvccError, match=r'identifier "nope" is undefined'):
            build_cubin(bad, "sm_90", directory=cache)
    assert calls(fake_nvcc) == 2
    assert not list(cache.glob("*.cubin"))


def test_arch_selection() -> None:
    assert arch_for((9, 0)) == "sm_90"
    assert arch_for((8, 9), SOURCE) == "sm_89"
    wgmma = 'asm volatile("wgmma.fence.sync.aligned;");'
    assert needs_arch_specific(wgmma) and arch_for((9, 0), wgmma) == "sm_90a"
    assert not needs_arch_specific(SOURCE)
    assert nvcc_release("Build cuda_13.0.r13.0/compiler.36424714_0") == "13.0"


def test_tensor_core_kernels_need_sm80() -> None:
    """A device without bf16 `mma.sync` gets one line saying so, before nvcc runs."""
    mma = "  dd_mma_m16n8k16(d0, d1, d2, d3, a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, c0);"
    assert arch_for((8, 0), mma) == "sm_80"
    assert arch_for((9, 0), mma) == "sm_90"
    with pytest.raises(NvccError, match=r"needs sm_80 or newer; this device is sm_75 \("):
        arch_for((7, 5), mma)
    assert arch_for((7, 5), SOURCE) == "sm_75"


def cuda_module(name: str):
    ctx = make_context()
    module = Parser(ctx, (INPUTS / name).read_text()).parse_module()
    ConvertKernelToCudaPass().apply(ctx, module)
    return module


def test_kernels_source_merges_includes_once() -> None:
    module = cuda_module("two_kernels.mlir")
    source = kernels_source(module)
    assert source.count("__global__") == 3
    assert "deplodock_forward" not in source  # kernels only: the runtime does the host part
    includes = [ln for ln in source.splitlines() if ln.startswith("#include")]
    assert len(includes) == len(set(includes))


def test_the_device_primitives_a_unit_defines_need_no_tensor_cores(
    fake_nvcc: Path, tmp_path: Path
) -> None:
    """Every unit with a vector access or a cp.async defines dd_mma_m16n8k16 too (it carries
    the device part of cpu_simt.h, issue #39): only a kernel that calls it needs sm_80."""
    from tests.backend.test_async_vector_cuda import staged_cuda

    module = staged_cuda()
    assert "dd_mma_m16n8k16(" in kernels_source(module)
    assert build_module(module, (7, 5), directory=tmp_path / "cache").arch == "sm_75"


def test_build_module_keeps_resources_per_kernel(fake_nvcc: Path, tmp_path: Path) -> None:
    module = cuda_module("two_kernels.mlir")
    build = build_module(module, (9, 0), directory=tmp_path / "cache")
    assert build.arch == "sm_90"
    assert set(build.kernels) == {"row_mean", "center", "scale_bf16"}
    assert all(r.registers == 40 for r in build.kernels.values())


@pytest.mark.nvcc
@pytest.mark.skipif(not nvcc.nvcc_available(), reason="nvcc is not on PATH")
def test_real_nvcc_build_is_cached(tmp_path: Path) -> None:
    module = cuda_module("rms_norm.mlir")
    first = build_module(module, (9, 0), directory=tmp_path / "cache")
    second = build_module(module, (9, 0), directory=tmp_path / "cache")
    assert not first.cached and second.cached
    assert first.cubin == second.cubin and first.cubin[:4] == b"\x7fELF"
    assert second.kernels == first.kernels
    res = second.kernels["rms_norm"]
    assert res.registers > 0 and not res.spills and res.shared_bytes == 16
    assert "cuda_" in second.nvcc_version
