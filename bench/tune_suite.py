"""`python -m bench.tune_suite`: tune the kernel suite on the performance model, before/after.

    python -m bench.tune_suite --dtype fp32 --kernel-budget-s 20 --cache-db /tmp/suite.db
    python -m bench.tune_suite --dtype bf16 --trials 40 --workers 2 --kernel-budget-s 900

With `--workers N` the candidates are checked and scored on a local Ray runtime of N workers
(`deplodock.tune.parallel`, the `distributed` extra), a case's kernels searched together.
By default a candidate is checked only when the model says it could win
(`tuner.candidate_scorer`); `--check-all` checks every one.

Each case's kernels are tuned (`deplodock.tune`, SP-MCTS, scored by the model of `--model`,
every candidate checked against the loop level in the CPU interpreter unless `--no-check`),
then the case is modeled again with its tuned schedules replayed. "Before" is the committed
default-schedule suite (`kernels-modeled-<device>-<dtype>.json`, written by
`python -m bench.kernels --model`). Written under `--out`:

- `kernels-modeled-<device>-<dtype>-tuned.json` / `.md`: the suite, tuned (same schema);
- `tuning-<device>-<dtype>.md`: per case, modeled time before and after, the gain, the
  limiter before and after; the geomean gain per family and overall; the cases whose
  limiter changed; the search settings.

Everything here is MODELED, never measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cases import DTYPES, add_case_patterns, find_cases
from bench.modeled import document, markdown, model_case, published_linear_rows
from bench.report import geomean, write_json
from deplodock.files import write_atomic
from deplodock.perf.devices import DEFAULT_DEVICE

DEFAULT_OUT = Path(__file__).resolve().parent / "results"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.tune_suite", description=__doc__)
    add_case_patterns(parser)
    parser.add_argument("--dtype", choices=DTYPES, default="fp32")
    parser.add_argument(
        "--model", default=DEFAULT_DEVICE, help=f"device model (default: {DEFAULT_DEVICE})"
    )
    parser.add_argument("--kernel-budget-s", type=float, default=20.0, help="per kernel (20)")
    parser.add_argument("--patience", type=int, default=40)
    parser.add_argument("--trials", type=int, help="at most N variants per kernel")
    parser.add_argument("--workers", type=int, help="score on N local Ray workers")
    parser.add_argument("--check-all", action="store_true", help="check even losing candidates")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--cache-db", type=Path, help="the tune cache (default: the user's)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--before", type=Path, help="the default-schedule suite (default: the committed one)"
    )
    return parser.parse_args(argv)


def tune_case(
    case: Any, dtype: str, evaluator: Any, options: Any, cache: Any, pool: Any = None
) -> dict:
    """Tunes one case's kernels (on `pool`'s workers when given); what the search did."""
    from deplodock.driver import lower_program, program_from_expression
    from deplodock.tune.parallel import tune_program_parallel
    from deplodock.tune.tuner import tune_program

    program = program_from_expression(case.expression(dtype))
    lower_program(program, "loop")
    if pool is None:
        result = tune_program(program.module, evaluator, options, cache)
    else:
        result = tune_program_parallel(program.module, evaluator, options, pool, cache)
    return {
        "kernels": [
            {
                "kernel": k.name,
                "default_us": k.record.default_us,
                "tuned_us": k.record.best_us,
                "trials": k.record.trials,
                "seconds": round(k.record.seconds, 1),
                "cached": k.cached,
                "stopped": k.stopped,
                "knobs": dict(k.record.knobs),
            }
            for k in result.kernels
        ],
        "seconds": round(result.seconds, 1),
    }


def searched_kernels(tuning: dict[str, dict]) -> list[dict]:
    """Each distinct kernel searched in this run once (a kernel found in the cache, searched
    for an earlier case or an earlier run, is not counted again)."""
    return [k for case in tuning.values() for k in case["kernels"] if not k["cached"]]


def comparison(before: dict[str, dict], after: Sequence[dict], tuning: dict[str, dict]) -> dict:
    """Per-case gains and % SOL, their geomean per family, the limiter changes, and how
    many variants each distinct kernel's search evaluated."""
    cases = []
    for row in after:
        old = before.get(row["case"])
        if row["status"] != "ok" or old is None or old["status"] != "ok":
            continue
        cases.append(
            {
                "case": row["case"],
                "family": row["family"],
                "before_us": old["modeled_us"],
                "after_us": row["modeled_us"],
                "gain": round(old["modeled_us"] / row["modeled_us"], 4),
                "sol_before": old["sol_pct"],
                "sol_after": row["sol_pct"],
                "limiter_before": old["limiter"],
                "limiter_after": row["limiter"],
                "trials": sum(k["trials"] for k in tuning[row["case"]]["kernels"]),
                "tune_seconds": tuning[row["case"]]["seconds"],
            }
        )
    families = sorted({c["family"] for c in cases})

    def per_family(key: str) -> dict[str, float]:
        return {
            f: round(geomean([c[key] for c in cases if c["family"] == f]), 4) for f in families
        } | {"all": round(geomean([c[key] for c in cases]), 4)}

    searched = searched_kernels(tuning)
    trials = sorted(k["trials"] for k in searched)
    return {
        "geomean_gain": per_family("gain"),
        "geomean_sol_before": per_family("sol_before"),
        "geomean_sol_after": per_family("sol_after"),
        "limiter_changed": [c for c in cases if c["limiter_before"] != c["limiter_after"]],
        "cases": cases,
        "kernels_searched": len(searched),
        "variants": sum(trials),
        "fewest_variants": trials[0] if trials else 0,
        "median_variants": trials[len(trials) // 2] if trials else 0,
        "stopped": {
            rule: sum(k["stopped"] == rule for k in searched)
            for rule in sorted({k["stopped"] for k in searched})
        },
    }


def comparison_markdown(result: dict, settings: dict) -> str:
    trials = settings["trials"]
    workers = settings["workers"]
    stopped = ", ".join(f"{n} by {rule}" for rule, n in result["stopped"].items())
    lines = [
        f"# Tuning the kernel suite on the performance model: {settings['device']}, "
        f"{settings['dtype']}",
        "",
        f"MODELED, not measured. Generated {settings['date']} at commit {settings['commit']} by "
        f"`{settings['command']}`: SP-MCTS per kernel, at most "
        + (f"{trials} variants, " if trials else "")
        + f"{settings['kernel_budget_s']} s and patience {settings['patience']} per kernel, "
        f"seed {settings['seed']}, "
        + (f"scored on {workers} local Ray workers" if workers else "scored in one process")
        + ", candidates "
        + (
            "not checked"
            if not settings["check"]
            else "all checked"
            if settings["check_all"]
            else "checked when the model says they could win"
        )
        + " against the loop level in the CPU interpreter. Before: the default (heuristic) "
        f"schedules (`kernels-modeled-{settings['device_key']}-{settings['dtype']}.json`); "
        f"after: the tuned ones "
        f"(`kernels-modeled-{settings['device_key']}-{settings['dtype']}-tuned.json`).",
        "",
        f"The run: {settings['wall_s'] / 60:.1f} min of wall time on {settings['cores']} cores; "
        f"{result['kernels_searched']} distinct kernels searched, {result['variants']} variants "
        f"evaluated (per kernel: fewest {result['fewest_variants']}, median "
        f"{result['median_variants']}); searches ended {stopped}. A kernel whose whole space "
        "is smaller than the trial limit ends `exhausted`, every variant evaluated. A case "
        "whose kernels were searched for an earlier case (same structure) shows 0 s.",
        "",
        "% SOL is the one of `deplodock/perf/sol.py` (ideal time at the datasheet's peaks, "
        "launches included, over the modeled time).",
        "",
        "| family | geomean modeled gain | geomean % SOL before | after |",
        "|---|---|---|---|",
        *[
            f"| {f} | {g:.3f}x | {result['geomean_sol_before'][f]:.2f} | "
            f"{result['geomean_sol_after'][f]:.2f} |"
            for f, g in result["geomean_gain"].items()
        ],
        "",
        f"Cases whose limiter changed: {len(result['limiter_changed'])}"
        + (
            " ("
            + "; ".join(
                f"{c['case']} {c['limiter_before']} -> {c['limiter_after']}"
                for c in result["limiter_changed"]
            )
            + ")"
            if result["limiter_changed"]
            else ""
        ),
        "",
        "| case | before us | after us | gain | % SOL before -> after | limiter before -> after "
        "| variants | tune s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in result["cases"]:
        lines.append(
            f"| {c['case']} | {c['before_us']} | {c['after_us']} | {c['gain']:.3f}x | "
            f"{c['sol_before']} -> {c['sol_after']} | "
            f"{c['limiter_before']} -> {c['limiter_after']} | {c['trials']} | "
            f"{c['tune_seconds']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    import os
    import time

    from bench.model_calibration import git_commit
    from deplodock.tune.cache import TuneCache
    from deplodock.tune.evaluate import ModelEvaluator
    from deplodock.tune.replay import model_replay
    from deplodock.tune.tuner import TuneOptions

    args = parse_args(argv)
    cases = find_cases(args.cases)
    stem = f"kernels-modeled-{args.model}-{args.dtype}"
    before_path = args.before or DEFAULT_OUT / f"{stem}.json"
    before = {r["case"]: r for r in json.loads(before_path.read_text())["rows"]}
    evaluator = ModelEvaluator(args.model)
    options = TuneOptions(kernel_budget_s=args.kernel_budget_s, patience=args.patience,
                          max_trials=args.trials, seed=args.seed, check=not args.no_check,
                          check_all=args.check_all)  # fmt: skip
    cache = TuneCache(args.cache_db)
    replay = model_replay(args.model, cache.path)
    gemm_rows = published_linear_rows()
    pool = None
    if args.workers:
        from deplodock.tune.parallel import ray_pool

        pool = ray_pool(args.workers, None)
    start = time.monotonic()
    rows, tuning = [], {}
    try:
        for n, case in enumerate(cases, 1):
            tuning[case.name] = tune_case(case, args.dtype, evaluator, options, cache, pool)
            row = model_case(case, args.dtype, args.model, gemm_rows, replay)
            rows.append(row)
            old = before.get(case.name, {}).get("modeled_us")
            print(f"[{n:>2}/{len(cases)}] {case.name:<40} {old} -> {row.get('modeled_us')} us "
                  f"({tuning[case.name]['seconds']} s)", flush=True)  # fmt: skip
    finally:
        if pool is not None:
            pool.close()
    wall_s = time.monotonic() - start
    doc = document(rows, args.model, args.dtype)
    doc["tuned"] = {"cache": str(cache.path), "cases": tuning}
    write_json(args.out / f"{stem}-tuned.json", doc)
    write_atomic(
        args.out / f"{stem}-tuned.md",
        markdown(doc).replace(
            "Every kernel has deplodock's current default schedule.",
            f"Every kernel has its schedule tuned by `python -m bench.tune_suite` "
            f"(see tuning-{args.model}-{args.dtype}.md).",
        ),
    )
    result = comparison(before, rows, tuning)
    settings = {
        "device": doc["device_model"], "device_key": args.model, "dtype": args.dtype,
        "date": datetime.date.today().isoformat(), "commit": git_commit(),
        "kernel_budget_s": args.kernel_budget_s, "patience": args.patience, "seed": args.seed,
        "trials": args.trials, "workers": args.workers, "check": not args.no_check,
        "check_all": args.check_all, "wall_s": wall_s, "cores": os.cpu_count(),
        "command": "python -m bench.tune_suite " + " ".join(argv if argv is not None
                                                            else sys.argv[1:]),
    }  # fmt: skip
    write_atomic(
        args.out / f"tuning-{args.model}-{args.dtype}.md", comparison_markdown(result, settings)
    )
    print(
        "geomean modeled gain: " + ", ".join(f"{k} {v}x" for k, v in result["geomean_gain"].items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
