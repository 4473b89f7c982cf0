"""`python -m bench.kernels --model h100`: the kernel suite on the performance model, no GPU.

Every case is compiled to the kernel level and each of its kernels is traced and modeled
(`deplodock.perf`). The results are *modeled*, never measured, and say so in every file:

- `kernels-modeled-<device>-<dtype>.json`: the device model, the calibration's fit date, and
  per case the modeled time, its % of speed-of-light (`deplodock/perf/sol.py`: the program's
  ideal time over its whole modeled time, launches included), the error band of its family
  (`calibration.json`), the slowest kernel's limiter, every kernel's counters, and the
  published PyTorch-eager H100 time where `bench/perfdata/` has the op (fp32 GEMMs: same
  input and output features, nearest rows);
- `kernels-modeled-<device>-<dtype>.md`: the summary (geomean % SOL per family with its error
  band, the five worst cases with their limiter) and the table;
- `kernels-modeled-<device>-<dtype>-sol.png` (per-case % SOL) and `-roofline.png`.

File names carry no timestamp: re-running the documented command regenerates them in place.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.cases import Case
from bench.model_calibration import git_commit
from bench.published import DATA
from bench.report import geomean, save_figure, write_json
from deplodock.files import write_atomic

GEMM_CSV = DATA / "h100-eager-gemm-fp32.csv"
#: Which summary family each case op belongs to.
FAMILIES = {
    "rmsnorm": "memory-bound",
    "softmax": "memory-bound",
    "silu_mul": "memory-bound",
    "sdpa_gqa": "attention",
    "attention": "attention",
}
SCHEMA_VERSION = 3


def family_of(op: str) -> str:
    return FAMILIES.get(op, "GEMM")


def band_family(case: Case, dtype: str) -> str:
    """The case's error-band family (`calibration.json`): a GEMM's carries its dtype."""
    family = family_of(case.op)
    return f"GEMM {'fp32' if dtype == 'fp32' else 'bf16'}" if family == "GEMM" else family


def published_linear_rows(path: Path = GEMM_CSV) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open() as handle:
        return [r for r in csv.DictReader(handle) if r["op"] == "linear"]


def nearest_published_gemm(
    case: Case, dtype: str, rows: Sequence[dict[str, Any]]
) -> dict[str, Any] | None:
    """The published fp32 `linear` row with the case's input and output features and the
    nearest number of rows. The file's `N` is the input features and its `K` the output
    features (`bench/published_gemm.py` reads them so from cuBLAS' grid)."""
    if dtype != "fp32" or family_of(case.op) != "GEMM":
        return None
    m, k = case.inputs[0][1], case.inputs[0][2]
    n = case.output[2]
    same = [r for r in rows if int(r["N"]) == k and int(r["K"]) == n]
    if not same:
        return None
    best = min(same, key=lambda r: abs(math.log(int(r["B"]) * int(r["M"]) / m)))
    return {
        "latency_us": float(best["latency_us"]),
        "shape": f"{int(best['B']) * int(best['M'])}x{k}x{n}",
        "kernel": best["kernel"],
    }


def split_model_key(key: str) -> tuple[str, str | None]:
    """`h200@latency` -> (`h200`, `latency`): a device model and the measured run (its
    timing) whose own constants it takes (`perf.model.run_key`); `h200` -> (`h200`, None)."""
    device, _, timing = key.partition("@")
    return device, timing or None


def calibration_for(key: str) -> Any:
    """The calibration a `--model` key models with: the shared constants, or a run's own."""
    from deplodock.perf.model import for_run, load_calibration

    device, timing = split_model_key(key)
    return for_run(load_calibration(), device, timing) if timing else load_calibration()


def model_case(
    case: Case, dtype: str, device_key: str, gemm_rows: Sequence[dict], replay: Any = None
) -> dict:
    """One row: the case compiled to the kernel level and modeled on the device (with
    `replay`, a `deplodock.tune.replay.Replay`: its kernels' tuned schedules)."""
    from bench.trace_cache import estimate_program
    from deplodock.driver import lower_program, program_from_expression
    from deplodock.perf.devices import device_model
    from deplodock.perf.profile import ptxas_registers

    device = device_model(split_model_key(device_key)[0])
    row: dict[str, Any] = {
        "case": case.name,
        "op": case.op,
        "family": family_of(case.op),
        "band": band_family(case, dtype),
        "model": case.model.name,
        "seq": case.seq,
        "dtype": dtype,
        "expression": case.expression(dtype),
        "status": "ok",
        "reason": None,
    }
    try:
        program = program_from_expression(row["expression"])
        lower_program(program, "kernel", replay=replay)
        registers = ptxas_registers(program.module, device.capability)
        estimate = estimate_program(program.module, device, registers, calibration_for(device_key))
    except Exception as error:  # a case that does not compile is a row, not a crash
        return row | {"status": "compile_error", "reason": str(error).splitlines()[0]}
    kernels = [e.as_row() | {"launches": n} for e, n in estimate.kernels]
    dram = sum(e.dram_bytes * n for e, n in estimate.kernels)
    published = nearest_published_gemm(case, dtype, gemm_rows)
    return row | {
        "modeled_us": round(estimate.total_us, 3),
        "busy_us": round(estimate.busy_us, 3),
        "ideal_us": round(estimate.ideal_us, 3),
        "sol_pct": round(100 * estimate.sol_fraction, 2),
        "flops": round(estimate.work.flops),
        "compulsory_bytes": round(estimate.work.compulsory_bytes),
        "limiter": estimate.kernels[0][0].limiter,
        "dram_bytes": round(dram),
        "registers_source": estimate.registers_source,
        "published_eager_us": published["latency_us"] if published else None,
        "published_shape": published["shape"] if published else None,
        "kernels": kernels,
    }


def _modeled_rows(
    cases: Sequence[Case], dtype: str, device_key: str, gemm_rows: Sequence[dict], jobs: int
):
    """(case, row) in the order of `cases`; with `jobs > 1` the cases are modeled in worker
    processes (each case is independent: its own compile and trace)."""
    if jobs <= 1:
        for case in cases:
            yield case, model_case(case, dtype, device_key, gemm_rows)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [
            pool.submit(_model_case_named, case.name, dtype, device_key, gemm_rows)
            for case in cases
        ]
        for case, future in zip(cases, futures, strict=True):
            yield case, future.result()


def _model_case_named(name: str, dtype: str, device_key: str, gemm_rows: Sequence[dict]) -> dict:
    """`model_case` in a worker process: cases hold closures, so they travel by name."""
    from bench.cases import all_cases

    case = next(c for c in all_cases() if c.name == name)
    return model_case(case, dtype, device_key, gemm_rows)


def _merged(old: Sequence[dict], new: Sequence[dict]) -> list[dict]:
    """`old` rows in their order, those of the cases in `new` replaced (new cases appended)."""
    fresh = {row["case"]: row for row in new}
    rows = [fresh.pop(row["case"], row) for row in old]
    return rows + list(fresh.values())


def summary(rows: Sequence[dict]) -> dict[str, Any]:
    """Geomean % SOL per family, the five worst cases (lowest % SOL) with their limiter, and
    the GEMMs at 512 tokens' % SOL (min and geomean: a bar GEMMs are held to)."""
    ok = [r for r in rows if r["status"] == "ok"]
    families = sorted({r["family"] for r in ok})
    worst = sorted(ok, key=lambda r: r["sol_pct"])[:5]
    gemm_512 = [r["sol_pct"] for r in ok if r["family"] == "GEMM" and r["seq"] == 512]
    return {
        "cases": len(rows),
        "ok": len(ok),
        "geomean_sol_pct": {
            f: round(geomean([r["sol_pct"] for r in ok if r["family"] == f]), 2) for f in families
        }
        | {"all": round(geomean([r["sol_pct"] for r in ok]), 2)},
        "total_modeled_us": round(sum(r["modeled_us"] for r in ok), 1),
        "worst": [
            {"case": r["case"], "sol_pct": r["sol_pct"], "limiter": r["limiter"]} for r in worst
        ],
        "gemm_512_sol_pct": {
            "min": min(gemm_512, default=None),
            "geomean": round(geomean(gemm_512), 2) if gemm_512 else None,
        },
    }


def document(rows: Sequence[dict], device_key: str, dtype: str) -> dict[str, Any]:
    from deplodock.perf.devices import device_model
    from deplodock.perf.model import load_calibration

    calibration = load_calibration()
    device, timing = split_model_key(device_key)
    return {
        "schema_version": SCHEMA_VERSION,
        "suite": "bench.kernels",
        "modeled": True,
        "note": "modeled by deplodock's performance model, not measured on a GPU",
        "device_model": device_model(device).name,
        "device_key": device_key,
        "dtype": dtype,
        "date": datetime.date.today().isoformat(),
        "commit": git_commit(),
        "calibration": {
            "fit_date": calibration.fit_date,
            "commit": calibration.commit,
            "model_version": calibration.model_version,
            "constants": f"that {device} run's own ({device_key})" if timing else "shared",
        },
        "error_bands": {
            r["family"]: calibration.band_label(r["band"]) for r in rows if r.get("band")
        },
        "summary": summary(rows),
        "rows": list(rows),
    }


def markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    lines = [
        f"# Kernel suite on the performance model: {doc['device_model']}, {doc['dtype']}",
        "",
        f"MODELED, not measured. Generated {doc['date']} at commit {doc['commit']} by "
        f"`python -m bench.kernels --model {doc['device_key']} --dtype "
        f"{doc['dtype']}`; model v{doc['calibration']['model_version']}, constants fitted "
        f"{doc['calibration']['fit_date']}. Every kernel has deplodock's current default "
        "schedule.",
        *(
            [
                "",
                f"Constants: {doc['calibration']['constants']}: the sustained clock and "
                "launch cost that run's timing saw, not the device's datasheet behaviour; "
                "these times are what that session would have measured.",
            ]
            if doc["calibration"].get("constants", "shared") != "shared"
            else []
        ),
        "",
        "% SOL (`deplodock/perf/sol.py`): the program's ideal time (its inputs read once and "
        "outputs written once at the datasheet DRAM bandwidth, or its useful flops at the "
        "datasheet peak of the dtype's fastest dense path: the FP32 FMA peak for fp32, where "
        "tf32x3 on tensor cores may pass 100 %, the dense tensor-core peak for bf16) over its "
        "whole modeled time, launches included. Each family's error band: the model against "
        "held-out measurements (`bench/results/model-validation.md`).",
        "",
        f"{s['ok']} of {s['cases']} cases modeled; total modeled time {s['total_modeled_us']} us.",
        "",
        "| family | geomean % of speed-of-light (modeled) | error band |",
        "|---|---|---|",
        *[
            f"| {family} | {value} | {doc.get('error_bands', {}).get(family, '')} |"
            for family, value in s["geomean_sol_pct"].items()
        ],
        "",
        "Five worst cases: "
        + "; ".join(f"{w['case']} {w['sol_pct']}% ({w['limiter']})" for w in s["worst"]),
        "",
        f"GEMMs at 512 tokens, % SOL (modeled): min {s['gemm_512_sol_pct']['min']}%, geomean "
        f"{s['gemm_512_sol_pct']['geomean']}%.",
        "",
        "| case | modeled us | % SOL (modeled) | limiter | kernels | published eager us (shape) |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        if r["status"] != "ok":
            lines.append(f"| {r['case']} | {r['status']}: {r['reason']} | | | | |")
            continue
        published = (
            f"{r['published_eager_us']} ({r['published_shape']})" if r["published_eager_us"] else ""
        )
        lines.append(
            f"| {r['case']} | {r['modeled_us']} | {r['sol_pct']} | {r['limiter']} | "
            f"{len(r['kernels'])} | {published} |"
        )
    return "\n".join(lines) + "\n"


def draw_sol_chart(rows: Sequence[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r["status"] == "ok"]
    colors = {"GEMM": "tab:blue", "memory-bound": "tab:green", "attention": "tab:purple"}
    fig, ax = plt.subplots(figsize=(10, max(3.0, 0.2 * len(ok) + 1.5)))
    ys = list(range(len(ok)))[::-1]
    ax.barh(ys, [r["sol_pct"] for r in ok], color=[colors[r["family"]] for r in ok])
    ax.set_yticks(ys)
    ax.set_yticklabels([r["case"] for r in ok], fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("% of speed-of-light (modeled)")
    ax.set_title(title, fontsize=10)
    for family, color in colors.items():
        ax.barh([], [], color=color, label=family)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def draw_roofline(rows: Sequence[dict], path: Path, title: str, device_key: str) -> Path:
    """Each kernel at (flops per DRAM byte, modeled GFLOP/s) under the device's roofs: the
    FP32 peak, and the tensor peak (dashed) when a kernel does tensor-core math."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from deplodock.perf.devices import device_model

    device = device_model(split_model_key(device_key)[0])
    fig, ax = plt.subplots(figsize=(8, 6))
    points: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        for k in r["kernels"]:
            if k["flops"] and k["dram_bytes"] and k["busy_us"]:
                intensity = k["flops"] / k["dram_bytes"]
                rate = k["flops"] / (k["busy_us"] * 1e-6) / 1e9
                points.setdefault(r["family"], []).append((intensity, rate))
    for family, xy in sorted(points.items()):
        ax.scatter([p[0] for p in xy], [p[1] for p in xy], s=12, label=family)
    xs = [10 ** (e / 10) for e in range(-20, 41)]
    roofs = [(device.fp32_flops_per_s / 1e9, "k-")]
    if any(k["instructions"].get("mma") for r in rows if r["status"] == "ok" for k in r["kernels"]):
        roofs.append((device.tensor_flops_per_s / 1e9, "k--"))  # tensor-core math has its own
    for peak, style in roofs:
        ax.plot(xs, [min(peak, x * device.dram_bytes_per_s / 1e9) for x in xs], style, linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flops per DRAM byte, modeled)")
    ax.set_ylabel("GFLOP/s (modeled)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def _modeled_detail(row: dict[str, Any]) -> str:
    if row["status"] == "ok":
        return f"{row['modeled_us']:10.1f} us {row['sol_pct']:6.2f}% SOL  {row['limiter']}"
    return f"{row['status']}: {row['reason']}"


def run_modeled_suite(
    cases: Sequence[Case],
    dtype: str,
    device_key: str,
    out_dir: Path,
    echo: Callable[[str], object] = print,
    jobs: int = 1,
    merge: bool = False,
    quiet: bool = False,
) -> Path:
    from deplodock.cli.progress import count_progress_bar

    gemm_rows = published_linear_rows()
    rows = []
    echo(f"{len(cases)} cases, {dtype}, MODELED on {device_key} (no GPU involved)")
    with count_progress_bar(len(cases), f"model {device_key}", quiet) as bar:
        modeled = _modeled_rows(cases, dtype, device_key, gemm_rows, jobs)
        for n, (case, row) in enumerate(modeled, 1):
            rows.append(row)
            bar.finish(echo, f"[{n:>2}/{len(cases)}] {case.name:<40} {_modeled_detail(row)}")
            if n < len(cases):
                bar.start(cases[n].name)
    stem = out_dir / f"kernels-modeled-{device_key}-{dtype}"
    if merge and stem.with_suffix(".json").exists():
        rows = _merged(json.loads(stem.with_suffix(".json").read_text())["rows"], rows)
    doc = document(rows, device_key, dtype)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(stem.with_suffix(".json"), doc)
    write_atomic(stem.with_suffix(".md"), markdown(doc))
    device = doc["device_model"]
    draw_sol_chart(
        rows, Path(f"{stem}-sol.png"), f"% of speed-of-light per case, {dtype}, {device}"
    )
    draw_roofline(rows, Path(f"{stem}-roofline.png"), f"roofline, {dtype}, {device}", device_key)
    s = doc["summary"]
    echo("geomean % SOL: " + ", ".join(f"{k} {v}" for k, v in s["geomean_sol_pct"].items()))
    echo("worst: " + "; ".join(f"{w['case']} {w['sol_pct']}% {w['limiter']}" for w in s["worst"]))
    echo(f"results: {stem}.json, .md, -sol.png, -roofline.png")
    return stem.with_suffix(".json")
