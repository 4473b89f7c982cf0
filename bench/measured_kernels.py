"""The kernels a measured suite ran, rebuilt at the commit that ran them, for today's model.

A measured row (`bench.kernels` on a GPU) says how long deplodock's kernels *of that commit*
took. To fit and check the performance model on it, the model must see those kernels, not
today's: the schedules have changed since. So the commit's source is exported (`git archive`,
no worktree metadata left behind) into the cache, each measured case is lowered to the kernel
level there by that commit's own compiler, and the kernel-level MLIR and ptxas' registers are
saved. Today's dialects read that IR (the kernel dialect only gained ops since), and today's
tracer counts it.

    python -m bench.measured_kernels bench/results/kernels-h200-fp32.json   # fills the cache
    python -m bench.measured_kernels bench/results/kernels-h200-*.json --modeled-out bench/results

With `--modeled-out`, it also writes the modeled suite of what ran
(`kernels-modeled-<device>-<dtype>.json`, `.md`): the kernels of that commit, today's model,
the file `bench.measured_vs_model` compares with the measurement.

Everything is cached under `~/.cache/deplodock/measured-kernels/<commit>/`: a second run
costs nothing (the traces of the IR are cached too, `bench.trace_cache`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deplodock.files import cache_root as deplodock_cache
from deplodock.files import write_atomic

REPOSITORY = Path(__file__).resolve().parent.parent


def cache_root() -> Path:
    return deplodock_cache() / "measured-kernels"


#: Run by the exported commit's interpreter, in its directory: lowers each (name, expression)
#: of the job to the kernel level with that commit's compiler, writes `<stem>.mlir` and
#: `<stem>.json` (ptxas registers, or the error). Only APIs af4e5e5 and later all have.
_GENERATOR = r"""
import json, sys
from pathlib import Path
from deplodock.driver import lower_program, program_from_expression
from deplodock.perf.profile import ptxas_registers

job = json.load(sys.stdin)
out = Path(job["out"])
for stem, expression in job["cases"]:
    meta = out / (stem + ".json")
    if meta.exists():
        continue
    try:
        program = program_from_expression(expression)
        lower_program(program, "kernel")
        (out / (stem + ".mlir")).write_text(str(program.module))
        registers = ptxas_registers(program.module, tuple(job["capability"]))
        meta.write_text(json.dumps({"status": "ok", "registers": registers}))
    except Exception as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        meta.write_text(json.dumps({"status": "error", "reason": reason}))
    print(stem, flush=True)
"""


def stem_of(case: str, dtype: str) -> str:
    """`q_proj/qwen2.5-7b/s512`, `bf16` -> `bf16--q_proj--qwen2.5-7b--s512` (a file name)."""
    return f"{dtype}--{case.replace('/', '--')}"


def export_commit(commit: str, root: Path | None = None) -> Path:
    """The source tree of `commit`, exported once into the cache."""
    target = (root or cache_root()) / commit / "source"
    if (target / "deplodock").is_dir():
        return target
    target.mkdir(parents=True, exist_ok=True)
    archive = target.parent / "source.tar"
    with archive.open("wb") as handle:
        subprocess.run(["git", "archive", commit], cwd=REPOSITORY, stdout=handle, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    archive.unlink()
    return target


def regenerate(
    commit: str,
    cases: Sequence[tuple[str, str, str]],
    capability: tuple[int, int] = (9, 0),
    root: Path | None = None,
) -> Path:
    """Lowers each `(case, dtype, expression)` at `commit`; returns the directory of the IR.
    Cases already there are skipped, so an interrupted run resumes."""
    out = (root or cache_root()) / commit / "kernels"
    out.mkdir(parents=True, exist_ok=True)
    todo = [
        (stem_of(case, dtype), expression)
        for case, dtype, expression in cases
        if not (out / f"{stem_of(case, dtype)}.json").exists()
    ]
    if not todo:
        return out
    source = export_commit(commit, root)
    job = {"out": str(out), "capability": list(capability), "cases": todo}
    env = os.environ | {"PYTHONPATH": str(source)}
    subprocess.run(
        [sys.executable, "-c", _GENERATOR],
        cwd=source,
        env=env,
        input=json.dumps(job),
        text=True,
        check=True,
    )
    return out


@dataclass(frozen=True)
class MeasuredCase:
    """One case a GPU measured, with the kernel-level IR of the commit that ran it."""

    case: str
    op: str
    dtype: str
    device: str
    commit: str
    measured_us: float
    mlir: Path
    registers: dict[str, int] | None
    #: How the run timed it (`bench.kernels --timing`): its own constants are keyed by it.
    timing: str = "latency"

    def module(self) -> Any:
        from xdsl.parser import Parser

        from deplodock.dialects import make_context

        return Parser(make_context(), self.mlir.read_text(), str(self.mlir)).parse_module()


def measured_cases(document: Path, root: Path | None = None) -> tuple[list[MeasuredCase], list]:
    """The ok rows of a measured `bench.kernels` JSON, each with its commit's kernels
    (regenerated when missing), and the rows that could not be rebuilt, with the reason."""
    doc = json.loads(document.read_text())
    rows = [r for r in doc["rows"] if r.get("status") == "ok" and r.get("deplodock_ms")]
    commit = doc["commit"]
    capability = tuple(doc.get("capability", (9, 0)))
    out = regenerate(commit, [(r["case"], r["dtype"], r["expression"]) for r in rows], capability)
    cases, skipped = [], []
    for row in rows:
        stem = stem_of(row["case"], row["dtype"])
        meta = json.loads((out / f"{stem}.json").read_text())
        if meta["status"] != "ok":
            skipped.append((row["case"], meta["reason"]))
            continue
        cases.append(
            MeasuredCase(
                row["case"],
                row["op"],
                row["dtype"],
                doc["device"],
                commit,
                1000 * row["deplodock_ms"],
                out / f"{stem}.mlir",
                meta["registers"],
                doc.get("timing", "latency"),
            )
        )
    return cases, skipped


def band_family(op: str, dtype: str) -> str:
    """The error-band family of a suite case: its op's family, a GEMM's with its dtype."""
    from bench.modeled import family_of

    family = family_of(op)
    return f"GEMM {dtype}" if family == "GEMM" else family


def trace_measured(case: MeasuredCase) -> Any:
    """The measured case as a `bench.published.TracedRow` of its commit's kernels."""
    from bench.published import TracedRow, traced_program
    from deplodock.perf.devices import model_key_for
    from deplodock.perf.model import run_key

    device = model_key_for(case.device) or "h100"
    return TracedRow(
        f"{case.case} {case.dtype}",
        band_family(case.op, case.dtype),
        f"measured {device.upper()}",
        device,
        case.measured_us,
        traced_program(case.mlir.read_text(), case.registers),
        detail=f"commit {case.commit}",
        constants_key=run_key(device, case.timing),
    )


def modeled_row(case: MeasuredCase, expression: str, seq: int, model: str) -> dict[str, Any]:
    """The case as a row of the modeled suite (`bench.modeled`'s schema), of the kernels
    that ran, modeled today (traces from `bench.trace_cache`)."""
    from bench.modeled import family_of
    from bench.trace_cache import estimate_program
    from deplodock.perf.devices import device_model, model_key_for
    from deplodock.perf.model import for_run, load_calibration

    device = device_model(model_key_for(case.device) or "h100")
    calibration = for_run(load_calibration(), device.key, case.timing)  # as that run saw it
    program = estimate_program(case.module(), device, case.registers, calibration)
    work, estimates = program.work, program.kernels
    return {
        "case": case.case,
        "op": case.op,
        "family": family_of(case.op),
        "band": band_family(case.op, case.dtype),
        "model": model,
        "seq": seq,
        "dtype": case.dtype,
        "expression": expression,
        "status": "ok",
        "reason": None,
        "modeled_us": round(program.total_us, 3),
        "busy_us": round(program.busy_us, 3),
        "ideal_us": round(program.ideal_us, 3),
        "sol_pct": round(100 * program.sol_fraction, 2),
        "flops": round(work.flops),
        "compulsory_bytes": round(work.compulsory_bytes),
        "limiter": estimates[0][0].limiter,
        "dram_bytes": round(sum(e.dram_bytes * n for e, n in estimates)),
        "registers_source": program.registers_source,
        "published_eager_us": None,
        "published_shape": None,
        "kernels": [e.as_row() | {"launches": n} for e, n in estimates],
    }


def modeled_suite(document: Path, out_dir: Path) -> Path:
    """`kernels-modeled-<device>-<dtype>.json` and `.md` of what the measured `document`
    ran: its commit's kernels, today's model and constants (`bench.modeled`'s schema)."""
    from bench.modeled import document as suite_document
    from bench.modeled import markdown
    from bench.report import write_json
    from deplodock.perf.devices import model_key_for

    doc = json.loads(document.read_text())
    by_case = {r["case"]: r for r in doc["rows"]}
    cases, _ = measured_cases(document)
    rows = [
        modeled_row(
            c, by_case[c.case]["expression"], by_case[c.case]["seq"], by_case[c.case]["model"]
        )
        for c in cases
    ]
    device = model_key_for(doc["device"]) or "h100"
    suite = suite_document(rows, device, doc["dtype"])
    suite["note"] += (
        f"; the kernels of commit {doc['commit']} (the commit the GPU ran, rebuilt there by "
        f"`python -m bench.measured_kernels {document.as_posix()} --modeled-out "
        f"{out_dir.as_posix()}`), modeled with today's model and constants"
    )
    suite["kernels_commit"] = doc["commit"]
    stem = out_dir / f"kernels-modeled-{device}-{doc['dtype']}"
    write_json(stem.with_suffix(".json"), suite)
    text = markdown(suite).replace(
        "Every kernel has deplodock's current default schedule.",
        f"The kernels are those of commit {doc['commit']}, which the GPU ran "
        f"({document.name}); they were rebuilt at that commit by `python -m "
        f"bench.measured_kernels {document.as_posix()} --modeled-out {out_dir.as_posix()}`, "
        "which wrote this file.",
    )
    write_atomic(stem.with_suffix(".md"), text)
    return stem.with_suffix(".json")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("documents", type=Path, nargs="+", help="measured bench.kernels JSONs")
    parser.add_argument(
        "--modeled-out",
        type=Path,
        help="also write the modeled suite of the kernels that ran (kernels-modeled-*) here",
    )
    args = parser.parse_args(argv)
    for document in args.documents:
        cases, skipped = measured_cases(document)
        print(f"{document}: {len(cases)} cases rebuilt, {len(skipped)} not")
        for case, reason in skipped:
            print(f"  {case}: {reason}")
        if args.modeled_out is not None:
            print(f"  wrote {modeled_suite(document, args.modeled_out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
