"""The published cuBLAS rows as deplodock schedules, and `--data`'s one line per row."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.model_validation import check_data, summary_line
from bench.published import RowError
from bench.published_gemm import GemmRow, cublas_schedule, parse_row

HEADER = "op,dtype,B,M,N,K,latency_us,kernel,grid,block"
XMMA = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize{}_stage3_warpsize{}_ffma_aligna4_cublas"
CUTLASS = "void cutlass::Kernel<cutlass_80_simt_sgemm_256x128_8x4_tn_align1>(x)"


def gemm(kernel: str, grid: str = "4x32x1", block: str = "128x1x1", op: str = "linear") -> GemmRow:
    row = dict(
        zip(HEADER.split(","), [op, "fp32", "1", "512", "4096", "4096", "386.0"], strict=False)
    )
    return parse_row(row | {"kernel": kernel, "grid": grid, "block": block})


def test_the_file_reads_n_as_the_reduction_and_k_as_the_output_columns():
    """cuBLAS' grid is ceil(M / tile_m) x ceil(K / tile_n): the output is M x K."""
    row = parse_row(
        {
            "op": "bmm", "B": "12", "M": "2048", "N": "64", "K": "2048",
            "latency_us": "219", "kernel": XMMA.format("64x256x8", "1x4x1"),
            "grid": "32x8x12", "block": "128x1x1",
        }
    )  # fmt: skip
    assert (row.batch, row.m, row.reduce, row.n_out) == (12, 2048, 64, 2048)
    assert row.grid == (32, 8, 12)


def test_an_xmma_name_is_its_tile_k_step_stages_and_warps():
    schedule = cublas_schedule(gemm(XMMA.format("128x128x8", "2x2x1")))
    knobs = schedule.knobs
    assert (knobs["bm"], knobs["bn"], knobs["bk"], knobs["depth"]) == (128, 128, 8, 3)
    assert knobs["threads"] == 128 and knobs["fm"] * knobs["fn"] == 128 * 128 // 128
    assert knobs["mma"] == 0  # FFMA: the FMA pipe, no tf32x3
    assert schedule.notes == ()


def test_a_cutlass_name_is_columns_by_rows_and_its_grid_z_splits_k():
    schedule = cublas_schedule(gemm(CUTLASS, grid="32x1x16", block="256x1x1"))
    knobs = schedule.knobs
    assert (knobs["bm"], knobs["bn"], knobs["depth"], knobs["threads"]) == (128, 256, 4, 256)
    assert knobs["splits"] == 16 and schedule.notes == ("split K over 16 (grid z)",)
    # 22 slices is no split deplodock takes: the nearest that divides K = 4096, said so
    odd = cublas_schedule(gemm(CUTLASS, grid="32x1x22", block="256x1x1"))
    assert odd.knobs["splits"] == 16
    assert odd.notes == ("split K over 22 (grid z) -> 16",)


def test_a_knob_deplodock_does_not_take_moves_to_the_nearest_and_says_so():
    schedule = cublas_schedule(gemm(XMMA.format("128x48x8", "2x2x1").replace("stage3", "stage6")))
    assert schedule.knobs["bn"] in (32, 64) and schedule.knobs["depth"] == 4
    assert any("tile 128x48" in note for note in schedule.notes)
    assert any("6 stages" in note for note in schedule.notes)


def test_a_name_without_a_tile_is_a_row_error():
    with pytest.raises(RowError, match="no tile"):
        cublas_schedule(gemm("ampere_sgemm_something"))


def test_data_prints_a_reason_per_unbuildable_row_and_the_summary_line(tmp_path: Path):
    """Rows that do not parse or hold no schedule are skipped with a reason, never a crash,
    and counted apart from the summary."""
    path = tmp_path / "rows.csv"
    path.write_text(
        f"{HEADER}\n"
        "bmm,fp32,12,64,384,384,abc,x,2x12x12,64x1x1\n"
        "bmm,fp32,12,64,384,384,30.0,no_schedule_here,2x12x12,64x1x1\n"
        "conv,fp32,1,1,1,1,3.0,x,1x1x1,32x1x1\n"
    )
    lines: list[str] = []
    stats = check_data(path, None, "h100", echo=lines.append)
    assert [line.split(": ")[1] for line in lines[:3]] == ["skipped"] * 3
    assert "no tile" in lines[1] and "not linear or bmm" in lines[2]
    assert lines[-2].startswith("3 rows skipped")
    assert lines[-1] == "0 rows: MAPE - %, median error - %, tau -" == summary_line(stats)


def test_a_file_of_other_columns_is_refused(tmp_path: Path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(RowError, match="neither"):
        check_data(path, None, "h100", echo=lambda line: None)


def test_the_summary_line_has_the_interface_format():
    stats = {"rows": 3, "mape_pct": 12.34, "median_error_pct": -5.0, "kendall_tau": 0.667}
    assert summary_line(stats) == "3 rows: MAPE 12.3 %, median error -5.0 %, tau 0.67"


def test_data_models_a_real_row_within_the_band(tmp_path: Path):
    """One small published row built with cuBLAS' 32 x 32 x 8 schedule, traced and modeled
    end to end (seconds: the build and the trace are cached after the first run)."""
    path = tmp_path / "row.csv"
    kernel = XMMA.format("32x32x8", "1x2x1")
    path.write_text(f"{HEADER}\nbmm,fp32,12,64,384,384,31.79,{kernel},2x12x12,64x1x1\n")
    lines: list[str] = []
    stats = check_data(path, 1, "h100", echo=lines.append)
    assert lines[0].startswith("[0] bmm 12x64x384x384: measured 31.8 us, modeled ")
    assert stats["rows"] == 1 and abs(stats["median_error_pct"]) < 50
