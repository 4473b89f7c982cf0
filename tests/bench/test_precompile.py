"""`bench.precompile`: the suite's cubins built ahead into the cache `bench.kernels` reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.precompile import main
from deplodock.backend import nvcc


@pytest.mark.nvcc
@pytest.mark.skipif(not nvcc.nvcc_available(), reason="nvcc is not on PATH")
def test_a_second_run_finds_every_cubin_in_the_cache(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    argv = ["-k", "rmsnorm/tinyllama-1.1b/s32", "--dtype", "fp32", "--dtype", "bf16"]
    assert main([*argv, "--jobs", "2"]) == 0
    first = capsys.readouterr().out.splitlines()
    assert [line.split(":")[1].split(",")[0] for line in first[:2]] == [" built", " built"]
    assert first[-1] == "2 of 2 programs built"
    assert len(list((tmp_path / "deplodock" / "cubin").glob("*.cubin"))) == 2
    assert main(argv) == 0
    second = capsys.readouterr().out.splitlines()
    assert all(" cache, 1 kernel(s), sm_90," in line for line in second[:2]), second


def test_an_unknown_case_is_a_one_line_error(capsys) -> None:
    assert main(["-k", "no-such-case"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bench.precompile: error: ") and err.count("\n") == 1


def test_a_bad_capability_is_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--capability", "nine"])
    assert "expected MAJOR.MINOR (like 9.0), got 'nine'" in capsys.readouterr().err
