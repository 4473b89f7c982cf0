"""nvcc and SASS for the backend tests: the skip mark for machines without nvcc, and the SASS
of a unit or of a cubin (`cuobjdump -sass`, from PATH or the `deplodock[sass]` wheels)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from deplodock.backend.nvcc import compile_cubin, nvcc_available

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH")


def sass_tool() -> list[str] | None:
    """`cuobjdump -sass` (PATH, or the nvidia-cuda-cuobjdump wheel), else None."""
    tool = shutil.which("cuobjdump")
    if tool is None and (spec := importlib.util.find_spec("nvidia")) is not None:
        for root in spec.submodule_search_locations or []:
            found = sorted(Path(root).glob("*/bin/cuobjdump"))
            if found:
                tool = str(found[0])
                break
    return None if tool is None else [tool, "-sass"]


def cubin_sass(cubin: bytes, tmp_path: Path) -> str:
    """The SASS of `cubin`; skips the test when cuobjdump is not installed."""
    tool = sass_tool()
    if tool is None:
        pytest.skip("cuobjdump not found: pip install 'deplodock[sass]' to check the SASS")
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    # cuobjdump runs nvdisasm; the wheels put both in one bin directory, maybe not on PATH.
    search = f"{Path(tool[0]).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        [*tool, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PATH": search},
    ).stdout


def sass_of(source: str, tmp_path: Path, arch: str = "sm_90") -> str:
    """The SASS of `source` built by nvcc (`-O3`) for `arch`."""
    if sass_tool() is None:  # before the build, as a skip should be
        pytest.skip("cuobjdump not found: pip install 'deplodock[sass]' to check the SASS")
    return cubin_sass(compile_cubin(source, arch=arch, extra_flags=["-O3"]).cubin, tmp_path)
