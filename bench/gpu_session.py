"""`bash bench/gpu_session.sh`: every minute of a lent GPU measured, within its budget.

    bash bench/gpu_session.sh                     # on the GPU machine, from the repo root
    bash bench/gpu_session.sh --budget 540 --out $OUT
    python -m bench.gpu_session --emulate         # here, no GPU: the plan on a virtual clock

A lent H100 or H200 comes for minutes, so the session is a plan of steps, each with its
expected time (`ESTIMATES`, and why) and a hard limit: the GPU tests, a calibration sweep of
our own kernels over the schedule space, one decoder layer of Qwen2.5-7B and of TinyLlama
(fp32 and bf16, 128 and 512 tokens) against eager and torch.compile, the 84-case suite in
fp32 and bf16 (graph timing), and `run --profile` beside the model for the ten cases the
suite found worst. torch.compile's compilation of the 168 suite cases is CPU work, minutes
of it: a background step warms Inductor's on-disk cache while the steps that do not need it
use the GPU, and the suites start when it is done, their own compiles then cache hits (the
order comes from the emulated run: with the suites first, the GPU would wait for the
compiles and the last steps would not fit). A step that cannot start with at least
`MIN_STEP_S` left is skipped, and says so; a step is cut at its limit or at the budget,
whichever comes first.

After every step the results folder is packed (`results.tgz` under `--out`), so a session
cut short still returns what it finished. The folder holds `session.json`, what the
session was (device, clocks, driver, torch, nvcc, commit, command, date, and each step's
status, seconds and files: `SESSION_KEYS`, `STEP_KEYS`), `summary.md`, each step's log, and
the steps' own JSON (`kernels-*.json`, `calibration-sweep-*.json`).

`--emulate` runs the same plan with each step replaced by a stand-in that takes the step's
expected time on a virtual clock and writes its files in the real format (marked
`"emulated": true`): it shows, on a machine without a GPU, that the plan skips nothing
within the budget, and the results-format test uses it. The plan is only as good as its
estimates; a real session's `session.json` gives the times to correct them with.

Only the standard library is imported here: on a bare machine this module runs before the
setup step has installed the project's dependencies.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import shlex
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

#: The budget: 9 minutes of a lent machine's time, the setup included.
BUDGET_S = 540.0
#: A step with less than this left is skipped rather than started to be cut.
MIN_STEP_S = 15.0
#: The decoder layers timed: (model, sequence length, dtype).
LAYERS = tuple(
    (model, seq, dtype)
    for model in ("Qwen/Qwen2.5-7B", "TinyLlama/TinyLlama-1.1B-Chat-v1.0")
    for dtype in ("fp32", "bf16")
    for seq in (128, 512)
)
#: How many of the suite's worst cases `run --profile` shows beside the model.
WORST = 10

#: Expected seconds per step on an H100/H200 with the cubins built ahead, and what each is
#: based on. The 2026-11-26 H200 session ran 14 suite cases a minute with nvcc and
#: torch.compile on the GPU machine; with the cubins carried and Inductor's cache warmed in
#: the background, a case is its check plus its timing (graph replays: about 0.2 s per
#: contender at 100 calls or 1 s).
ESTIMATES: dict[str, tuple[float, str]] = {
    "setup": (25.0, "pip install of the carried wheels, nvidia-smi, torch's CUDA init"),
    "warm-compile": (200.0, "background: torch.compile of 168 cases, 16 cores, ~1.2 s each"),
    "gpu-tests": (80.0, "tests/gpu with 4 workers (about 150 s on one in 2026-11)"),
    "suite-fp32": (110.0, "84 cases at ~1.3 s: check, three contenders graph-timed"),
    "suite-bf16": (110.0, "84 cases at ~1.3 s: check, three contenders graph-timed"),
    "calibration-sweep": (
        60.0,
        "216 points at ~0.25 s: parse and cached build 0.02 s (measured on the CPU machine), "
        "two graph captures, 5+ replays of ~5 ms",
    ),
    "layers": (80.0, "8 decoder layers at ~10 s: torch.compile of a layer, device timing"),
    "profile-worst": (45.0, "10 `run --profile` at ~4 s, cubins cached"),
}
#: Hard limits: an estimate's headroom; never past the budget either.
LIMIT_FACTOR = 1.6


@dataclass(frozen=True)
class Step:
    """One step: a command run from the repository root, with its log under the results."""

    name: str
    command: tuple[str, ...]
    estimate_s: float
    limit_s: float
    #: Started without waiting, finished (or cut) before the step named by `before`.
    background: bool = False
    before: str = ""
    #: Globs (under the results folder) of the files the step writes.
    produces: tuple[str, ...] = ()


@dataclass
class StepRecord:
    """What one step did. `seconds` runs from its start to when the session had its exit
    code: for a background step, to when the session waited for it (its own end may be
    earlier); `started_at` counts from the session's start."""

    name: str
    status: str  # ok, failed, timeout, skipped
    rc: int | None
    seconds: float
    started_at: float
    log: str
    files: list[str] = field(default_factory=list)
    reason: str = ""


#: The keys every `session.json` has (the results-format test checks them).
SESSION_KEYS = (
    "suite",
    "emulated",
    "budget_s",
    "elapsed_s",
    "device",
    "clocks",
    "driver",
    "torch",
    "nvcc",
    "commit",
    "command",
    "date",
    "steps",
)
STEP_KEYS = tuple(StepRecord.__dataclass_fields__)


def python() -> str:
    return os.environ.get("PYTHON", "python3")


def _limit(name: str) -> float:
    return round(ESTIMATES[name][0] * LIMIT_FACTOR)


def _step(name: str, command: Sequence[str], **kwargs: Any) -> Step:
    return Step(name, tuple(command), ESTIMATES[name][0], _limit(name), **kwargs)


def layer_commands(py: str) -> list[list[str]]:
    """`deplodock run --bench` of one decoder layer per (model, length, dtype)."""
    return [
        [
            *(py, "-m", "deplodock", "run", "--bench", "--timing", "device", model, "--layers"),
            *("1", "--seq-len", str(seq), "--dtype", dtype),
        ]
        for model, seq, dtype in LAYERS
    ]


def plan(results: Path, py: str | None = None) -> list[Step]:
    """The session's steps, in order (see the module docstring)."""
    py = py or python()
    me = [py, "-m", "bench.gpu_session"]
    suite = [py, "-m", "bench.kernels", "--timing", "graph", "--out", str(results), "-q"]
    return [
        _step("setup", [*me, "--setup", str(results)], produces=("environment.json",)),
        _step(
            "warm-compile",
            [*me, "--warm-compile"],
            background=True,
            before="suite-fp32",
        ),
        _step("gpu-tests", [*me, "--gpu-tests"]),
        _step(
            "calibration-sweep",
            [py, "-m", "bench.calibration_sweep", "--out", str(results)],
            produces=("calibration-sweep-*.json",),
        ),
        _step("layers", [*me, "--layers"]),
        _step("suite-fp32", [*suite, "--dtype", "fp32"], produces=("kernels-fp32-*.json",)),
        _step("suite-bf16", [*suite, "--dtype", "bf16"], produces=("kernels-bf16-*.json",)),
        _step("profile-worst", [*me, "--profile-worst", str(results)]),
    ]


# --- running the plan -----------------------------------------------------------------------


class Runner(Protocol):
    """Runs a step's command: `start` returns a handle, `wait` its exit code (None: cut)."""

    def now(self) -> float: ...

    def start(self, step: Step, log: Path) -> Any: ...

    def wait(self, handle: Any, deadline: float) -> int | None: ...


class ProcessRunner:
    """The real thing: a process group per step, killed whole at its deadline."""

    def now(self) -> float:
        return time.monotonic()

    def start(self, step: Step, log: Path) -> Any:
        out = log.open("w")
        return subprocess.Popen(
            step.command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait(self, handle: Any, deadline: float) -> int | None:
        try:
            return handle.wait(timeout=max(0.0, deadline - self.now()))
        except subprocess.TimeoutExpired:
            import signal

            os.killpg(handle.pid, signal.SIGTERM)
            try:
                handle.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(handle.pid, signal.SIGKILL)
                handle.wait()
            return None


class EmulatedRunner:
    """A virtual clock: each step takes its estimate (or `durations[name]`) and writes its
    files in the real format, marked emulated. Background steps run beside the others."""

    def __init__(self, results: Path, durations: dict[str, float] | None = None):
        self.results = results
        self.durations = durations or {}
        self.clock = 0.0

    def now(self) -> float:
        return self.clock

    def start(self, step: Step, log: Path) -> Any:
        duration = self.durations.get(step.name, step.estimate_s)
        log.write_text(f"emulated: {shlex.join(step.command)}\n")
        return (step, self.clock + duration)

    def wait(self, handle: Any, deadline: float) -> int | None:
        step, finish = handle
        if finish > deadline:
            self.clock = max(self.clock, deadline)
            return None
        self.clock = max(self.clock, finish)
        write_emulated_outputs(step, self.results)
        return 0


def write_emulated_outputs(step: Step, results: Path) -> None:
    """Stand-ins for the files a step writes, in the real format, marked emulated."""
    stamp = "19700101-000000"
    if step.name == "setup":
        write_json(results / "environment.json", emulated_environment())
    for pattern in step.produces:
        if pattern.startswith("kernels-"):
            dtype = pattern.split("-")[1]
            document = {
                "emulated": True,
                "suite": "bench.kernels",
                "dtype": dtype,
                "timing": "graph (L2 flushed between calls)",
                "rows": [],
            }
            write_json(results / f"kernels-{dtype}-{stamp}.json", document)
        elif pattern.startswith("calibration-sweep"):
            document = {"emulated": True, "suite": "bench.calibration_sweep", "rows": []}
            write_json(results / f"calibration-sweep-{stamp}.json", document)


def emulated_environment() -> dict[str, Any]:
    return {
        "emulated": True,
        "device": "emulated (no GPU)",
        "clocks": None,
        "driver": None,
        "torch": None,
        "nvcc": None,
    }


def write_json(path: Path, document: object) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n")
    tmp.replace(path)


def pack(results: Path, out: Path) -> Path:
    """`results.tgz` of the results folder, written whole then moved into place."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / "results.tgz"
    tmp = out / "results.tgz.tmp"
    with tarfile.open(tmp, "w:gz") as archive:
        archive.add(results, arcname=".")
    tmp.replace(target)
    return target


def produced(step: Step, results: Path) -> list[str]:
    found: list[str] = []
    for pattern in step.produces:
        found += sorted(Path(p).name for p in glob.glob(str(results / pattern)))
    return found


def run_plan(
    steps: Sequence[Step],
    results: Path,
    out: Path,
    runner: Runner,
    budget_s: float = BUDGET_S,
    on_step: Callable[[StepRecord], object] = lambda record: None,
) -> list[StepRecord]:
    """Runs the steps in order within `budget_s`; packs and reports after every step."""
    start = runner.now()
    end = start + budget_s
    records: list[StepRecord] = []
    background: dict[str, tuple[Step, Any, float]] = {}

    def finish(step: Step, handle: Any, began: float) -> None:
        rc = runner.wait(handle, min(end, began + step.limit_s))
        record_step(step, rc, began)

    def record_step(step: Step, rc: int | None, began: float, reason: str = "") -> None:
        status = "skipped" if reason else "timeout" if rc is None else "ok" if rc == 0 else "failed"
        record = StepRecord(
            step.name,
            status,
            rc,
            round(runner.now() - began, 1),
            round(began - start, 1),
            f"{step.name}.log",
            produced(step, results),
            reason,
        )
        records.append(record)
        write_session(results, records, runner, budget_s, start)
        pack(results, out)
        on_step(record)

    for step in steps:
        for name, (waiting, handle, began) in list(background.items()):
            if waiting.before == step.name:
                finish(waiting, handle, began)
                del background[name]
        left = end - runner.now()
        if left < MIN_STEP_S:
            record_step(step, None, runner.now(), f"the budget is spent ({left:.0f} s left)")
            continue
        began = runner.now()
        handle = runner.start(step, results / f"{step.name}.log")
        if step.background:
            background[step.name] = (step, handle, began)
            continue
        finish(step, handle, began)
    for waiting, handle, began in background.values():
        finish(waiting, handle, began)
    return records


# --- session.json and summary.md -------------------------------------------------------------


def git_commit() -> str:
    """The commit: `.gpu/commit` (written where the checkout has its git history, since a
    copied tree may not), else `git rev-parse`, else unknown."""
    carried = Path(".gpu/commit")
    if carried.exists():
        return carried.read_text().strip()
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        return done.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_session(
    results: Path, records: Sequence[StepRecord], runner: Runner, budget_s: float, start: float
) -> None:
    environment: dict[str, Any] = {}
    env_path = results / "environment.json"
    if env_path.exists():
        environment = json.loads(env_path.read_text())
    emulated = isinstance(runner, EmulatedRunner)
    document = {
        "suite": "bench.gpu_session",
        "emulated": emulated,
        "budget_s": budget_s,
        "elapsed_s": round(runner.now() - start, 1),
        "device": environment.get("device"),
        "clocks": environment.get("clocks"),
        "driver": environment.get("driver"),
        "torch": environment.get("torch"),
        "nvcc": environment.get("nvcc"),
        "commit": git_commit(),
        "command": shlex.join(sys.argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "steps": [asdict(r) for r in records],
    }
    write_json(results / "session.json", document)
    (results / "summary.md").write_text(summary_markdown(document))


def summary_markdown(session: dict[str, Any]) -> str:
    """A short summary: what ran, how long, what it wrote."""
    what = "EMULATED (no GPU; virtual clock)" if session["emulated"] else session["device"]
    lines = [
        f"# GPU session: {what}",
        "",
        f"{session['date']}, commit {session['commit']}; driver {session['driver']}, "
        f"torch {session['torch']}, nvcc {session['nvcc']}; "
        f"{session['elapsed_s']:.0f} of {session['budget_s']:.0f} s.",
        "",
        "| step | status | seconds | files |",
        "|---|---|---:|---|",
    ]
    for step in session["steps"]:
        status = step["status"] + (f" ({step['reason']})" if step["reason"] else "")
        files = ", ".join(step["files"]) or "-"
        lines.append(f"| {step['name']} | {status} | {step['seconds']:.1f} | {files} |")
    skipped = [s["name"] for s in session["steps"] if s["status"] == "skipped"]
    lines += ["", f"Skipped: {', '.join(skipped) if skipped else 'none'}.", ""]
    return "\n".join(lines)


# --- the steps that are functions of this module ---------------------------------------------


def setup(results: Path) -> int:  # pragma: no cover - the GPU machine
    """Installs the carried wheels and writes `environment.json` (device, clocks, versions)."""
    wheels = sorted(glob.glob(".gpu/wheels/*.whl"))
    if wheels:
        pip = [python(), "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
        subprocess.run([*pip, "--no-compile", "--target", "/tmp/site", *wheels], check=True)
    probe = (
        "import json, dataclasses, torch\n"
        "from deplodock.backend.device import require_cuda\n"
        "from bench.graph_timing import read_clocks\n"
        "info = dataclasses.asdict(require_cuda())\n"
        "info['device'] = info.pop('name')\n"
        "info['clocks'] = dataclasses.asdict(read_clocks(info['index']))\n"
        "print(json.dumps(info))\n"
    )
    done = subprocess.run([python(), "-c", probe], capture_output=True, text=True)
    print(done.stdout, done.stderr)
    if done.returncode != 0:
        return done.returncode
    write_json(results / "environment.json", json.loads(done.stdout.splitlines()[-1]))
    return 0


def worst_cases(documents: Sequence[dict[str, Any]], count: int = WORST) -> list[dict[str, Any]]:
    """The `count` correct rows with the lowest speedup over eager, across the documents."""
    rows = [
        row
        for document in documents
        for row in document.get("rows", [])
        if row.get("status") == "ok" and row.get("speedup_eager")
    ]
    return sorted(rows, key=lambda row: row["speedup_eager"])[:count]


def profile_worst(results: Path) -> int:  # pragma: no cover - the GPU machine
    documents = [
        json.loads(Path(p).read_text()) for p in glob.glob(str(results / "kernels-*.json"))
    ]
    failures = 0
    for row in worst_cases(documents):
        command = [python(), "-m", "deplodock", "run", "--profile", "-c", row["expression"]]
        command += ["--dtype", row["dtype"]] if row.get("dtype") == "bf16" else []
        print(f"== {row['case']} {row['dtype']}: {row['speedup_eager']:.2f}x eager", flush=True)
        failures += subprocess.run(command).returncode != 0
    return 1 if failures else 0


def gpu_tests() -> int:  # pragma: no cover - the GPU machine
    """tests/gpu, on 4 workers and with a per-test limit where the plugins are installed."""
    import importlib.util

    command = [python(), "-m", "pytest", "-m", "gpu", "tests/gpu", "-q", "-rs"]
    command += ["-p", "no:cacheprovider"]
    if importlib.util.find_spec("xdist"):
        command += ["-n", "4"]
    if importlib.util.find_spec("pytest_timeout"):
        command += ["--timeout", "120"]
    return subprocess.run(command).returncode


def layers() -> int:  # pragma: no cover - the GPU machine
    failures = 0
    for command in layer_commands(python()):
        print(f"== {shlex.join(command[3:])}", flush=True)
        failures += subprocess.run(command).returncode != 0
    return 1 if failures else 0


def warm_compile() -> int:  # pragma: no cover - the GPU machine
    """torch.compile of every suite case in both dtypes, so the suites hit Inductor's cache."""
    code = (
        "import sys, torch\n"
        "from bench.cases import all_cases\n"
        "from deplodock.driver import program_from_expression\n"
        "from deplodock.backend.benchmark import compile_exported\n"
        "for case in all_cases():\n"
        "    for dtype in ('fp32', 'bf16'):\n"
        "        torch._dynamo.reset()\n"
        "        try:\n"
        "            p = program_from_expression(case.expression(dtype))\n"
        "            m = p.torch_module.cuda()\n"
        "            xs = [x.cuda() for x in p.example_inputs]\n"
        "            with torch.no_grad():\n"
        "                compile_exported(m, xs)(*xs)\n"
        "        except Exception as e:\n"
        "            print(case.name, dtype, type(e).__name__, str(e)[:120], flush=True)\n"
    )
    return subprocess.run([python(), "-c", code]).returncode


# --- the command line -------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bash bench/gpu_session.sh", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds (default 540)")
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu-session-out"))
    )
    parser.add_argument("--results", type=Path, default=Path("/tmp/gpu-session"))
    parser.add_argument("--emulate", action="store_true", help="the plan on a virtual clock")
    parser.add_argument("--plan", action="store_true", help="print the plan and exit")
    step = parser.add_mutually_exclusive_group()
    step.add_argument("--setup", type=Path, metavar="RESULTS", help=argparse.SUPPRESS)
    step.add_argument("--warm-compile", action="store_true", help=argparse.SUPPRESS)
    step.add_argument("--gpu-tests", action="store_true", help=argparse.SUPPRESS)
    step.add_argument("--layers", action="store_true", help=argparse.SUPPRESS)
    step.add_argument("--profile-worst", type=Path, metavar="RESULTS", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def print_plan(steps: Sequence[Step], budget_s: float) -> None:
    foreground = sum(s.estimate_s for s in steps if not s.background)
    for s in steps:
        how = f"background, done before {s.before}" if s.background else ""
        print(f"{s.name:<18} ~{s.estimate_s:>4.0f} s (limit {s.limit_s:.0f} s) {how}")
        print(f"{'':<18} {ESTIMATES[s.name][1]}")
    print(f"expected {foreground:.0f} s in the foreground of a {budget_s:.0f} s budget")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.setup:
        return setup(args.setup)
    if args.warm_compile:
        return warm_compile()
    if args.gpu_tests:
        return gpu_tests()
    if args.layers:
        return layers()
    if args.profile_worst:
        return profile_worst(args.profile_worst)
    steps = plan(args.results)
    if args.plan:
        print_plan(steps, args.budget)
        return 0
    args.results.mkdir(parents=True, exist_ok=True)
    runner: Runner = EmulatedRunner(args.results) if args.emulate else ProcessRunner()

    def report(record: StepRecord) -> None:
        reason = f" ({record.reason})" if record.reason else ""
        print(
            f"== {record.name}: {record.status}{reason}, {record.seconds:.0f} s "
            f"(at {record.started_at:.0f} s)",
            flush=True,
        )

    records = run_plan(steps, args.results, args.out, runner, args.budget, report)
    skipped = sum(r.status == "skipped" for r in records)
    print(
        f"{len(records) - skipped} of {len(records)} steps run, {skipped} skipped; "
        f"results in {args.out / 'results.tgz'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
