"""`deplodock compile` loads what compiling needs and nothing else: no interpreter, no CPU
runner, no GPU runtime (they cost start-up time and, for the runtime, need pycuda), and for
a `.mlir` file not even PyTorch (about 1.4 s of a 2 s start-up before it was left out)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import contextlib, io, sys
from deplodock.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    status = main(sys.argv[1:])
assert status == 0
print("\\n".join(sorted(sys.modules)))
"""
ROOT = Path(__file__).resolve().parents[2]


def modules_loaded_by(*argv: str, env: dict[str, str] | None = None) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


NOT_FOR_COMPILE = (
    "deplodock.interpreters",
    "deplodock.backend.cpu_runner",
    "deplodock.backend.runtime",
    "deplodock.backend.benchmark",
    "deplodock.driver.cuda",
    "pycuda",
)


def test_compile_imports_no_interpreter_and_no_runtime() -> None:
    loaded = modules_loaded_by("compile", "-c", "nn.RMSNorm(64)(torch.randn(1, 4, 64))")
    assert "deplodock.passes.convert_kernel_to_cuda" in loaded  # the probe did compile
    unwanted = [m for m in loaded if m.startswith(NOT_FOR_COMPILE)]
    assert not unwanted, f"compile loaded {unwanted}"


def test_compiling_a_mlir_file_does_not_import_torch() -> None:
    loaded = modules_loaded_by("compile", "docs/examples/rmsnorm.mlir", "--ir", "cuda")
    assert "deplodock.passes.convert_kernel_to_cuda" in loaded
    assert "torch" not in loaded


def test_a_warm_compile_of_an_expression_does_not_import_torch(tmp_path: Path) -> None:
    """The second compile of one expression reads the captured torch-level module from the
    capture cache (`driver.capture_cache`): no torch, the same output."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    argv = ("compile", "-c", "nn.RMSNorm(64)(torch.randn(1, 4, 64))", "--ir", "cuda")
    cold = modules_loaded_by(*argv, env=env)
    assert "torch" in cold
    (entry,) = (tmp_path / "deplodock" / "captures").iterdir()
    warm = modules_loaded_by(*argv, env=env)
    assert "deplodock.passes.convert_kernel_to_cuda" in warm
    assert "torch" not in warm
    entry.write_text("builtin.module {")  # a damaged entry is captured again
    assert "torch" in modules_loaded_by(*argv, env=env)
