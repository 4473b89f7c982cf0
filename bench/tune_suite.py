"""`python -m bench.tune_suite`: tune the kernel suite on the performance model, before/after.

    python -m bench.tune_suite --dtype fp32 --kernel-budget-s 20 --cache-db /tmp/suite.db

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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--cache-db", type=Path, help="the tune cache (default: the user's)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--before", type=Path, help="the default-schedule suite (default: the committed one)"
    )
    return parser.parse_args(argv)


def tune_case(case: Any, dtype: str, evaluator: Any, options: Any, cache: Any) -> dict:
    """Tunes one case's kernels; a summary of what the search did."""
    from deplodock.driver import lower_program, program_from_expression
    from deplodock.tune.tuner import tune_program

    program = program_from_expression(case.expression(dtype))
    lower_program(program, "loop")
    result = tune_program(program.module, evaluator, options, cache)
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


def comparison(before: dict[str, dict], after: Sequence[dict], tuning: dict[str, dict]) -> dict:
    """Per-case gains, their geomean per family, and the limiter changes."""
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
                "limiter_before": old["limiter"],
                "limiter_after": row["limiter"],
                "trials": sum(k["trials"] for k in tuning[row["case"]]["kernels"]),
                "tune_seconds": tuning[row["case"]]["seconds"],
            }
        )
    families = sorted({c["family"] for c in cases})
    return {
        "geomean_gain": {
            f: round(geomean([c["gain"] for c in cases if c["family"] == f]), 4) for f in families
        }
        | {"all": round(geomean([c["gain"] for c in cases]), 4)},
        "limiter_changed": [c for c in cases if c["limiter_before"] != c["limiter_after"]],
        "cases": cases,
    }


def comparison_markdown(result: dict, settings: dict) -> str:
    lines = [
        f"# Tuning the kernel suite on the performance model: {settings['device']}, "
        f"{settings['dtype']}",
        "",
        f"MODELED, not measured. Generated {settings['date']} at commit {settings['commit']} by "
        f"`{settings['command']}`: SP-MCTS per kernel, at most {settings['kernel_budget_s']} s "
        f"and patience {settings['patience']} per kernel, seed {settings['seed']}, candidates "
        f"{'checked' if settings['check'] else 'not checked'} against the loop level in the "
        "CPU interpreter. Before: the default (heuristic) schedules "
        f"(`kernels-modeled-{settings['device_key']}-{settings['dtype']}.json`); after: the "
        f"tuned ones (`kernels-modeled-{settings['device_key']}-{settings['dtype']}-tuned.json`).",
        "",
        "| family | geomean modeled gain over the heuristic |",
        "|---|---|",
        *[f"| {f} | {g:.3f}x |" for f, g in result["geomean_gain"].items()],
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
        "| case | before us | after us | gain | limiter before -> after | variants | tune s |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in result["cases"]:
        lines.append(
            f"| {c['case']} | {c['before_us']} | {c['after_us']} | {c['gain']:.3f}x | "
            f"{c['limiter_before']} -> {c['limiter_after']} | {c['trials']} | "
            f"{c['tune_seconds']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
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
                          seed=args.seed, check=not args.no_check)  # fmt: skip
    cache = TuneCache(args.cache_db)
    replay = model_replay(args.model, cache.path)
    gemm_rows = published_linear_rows()
    rows, tuning = [], {}
    for n, case in enumerate(cases, 1):
        tuning[case.name] = tune_case(case, args.dtype, evaluator, options, cache)
        row = model_case(case, args.dtype, args.model, gemm_rows, replay)
        rows.append(row)
        old = before.get(case.name, {}).get("modeled_us")
        print(f"[{n:>2}/{len(cases)}] {case.name:<40} {old} -> {row.get('modeled_us')} us "
              f"({tuning[case.name]['seconds']} s)", flush=True)  # fmt: skip
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
        "check": not args.no_check,
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
