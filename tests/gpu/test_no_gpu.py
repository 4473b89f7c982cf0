"""Without a GPU, `run --device cuda` says why in one line and exits 1 (no traceback)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deplodock.backend.device import NoCudaDevice, cuda_unavailable_reason, require_cuda

pytestmark = pytest.mark.skipif(
    cuda_unavailable_reason() is None, reason="a GPU is available: the no-GPU path cannot show"
)


def deplodock(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deplodock", *argv], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    "extra", [("--device", "cuda"), ("--device", "cuda", "--bench"), ("--bench", "--profile")]
)
def test_run_on_cuda_is_a_one_line_error(extra: tuple[str, ...]) -> None:
    result = deplodock("run", "-c", "nn.RMSNorm(64)(torch.randn(1, 4, 64))", *extra)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("deplodock: error: no CUDA device: ")
    assert lines[0].removeprefix("deplodock: error: no CUDA device: ") == cuda_unavailable_reason()


def test_require_cuda_raises_with_the_reason() -> None:
    with pytest.raises(NoCudaDevice, match=r"^no CUDA device: \S"):
        require_cuda()


def test_bench_on_the_cpu_is_refused() -> None:
    result = deplodock("run", "-c", "torch.randn(4) * 2.0", "--device", "cpu", "--bench")
    assert result.returncode == 1
    assert result.stderr.strip() == "deplodock: error: --bench and --profile need --device cuda"
