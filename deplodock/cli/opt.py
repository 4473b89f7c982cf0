"""`deplodock-opt`: the MLIR-style driver over textual deplodock IR.

It is xDSL's `xdsl-opt` with deplodock's dialects, passes and `cuda` target, plus what an MLIR
user types by habit: `--pass-pipeline='builtin.module(a,b)'` and `--mlir-print-ir-after-all`.
`--list-passes` lists every pass with what it does and its options (with their defaults, in
the `-p` syntax). The version is `--version` only, as in `mlir-opt`: xdsl-opt's `-v` is not
taken over, since `-v` is `--verbose` in `deplodock` (`-v` here says so). Errors print as one
diagnostic (with `file:line:column` for parse errors) and exit 1, without a Python traceback
unless `--traceback` is given; a command line argparse cannot read is one line too, and a
mistyped pass or option name is answered with the closest one. Ctrl-C exits 130. `-o FILE`
is written only when the whole run succeeded, and atomically: a failed run leaves FILE as it
was.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import IO, Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_pipeline, parse_spec
from xdsl.utils.exceptions import VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from deplodock.cli.errors import OneLineArgumentParser, describe, run_command
from deplodock.cli.universe import DEPLODOCK_UNIVERSE
from deplodock.cli.version import VersionAction
from deplodock.dialects import get_all_dialects
from deplodock.files import write_atomic
from deplodock.passes import did_you_mean, get_all_passes, unknown_pass
from deplodock.passes.diffs import PassDiffs
from deplodock.passes.internal_errors import InternalError, RunningPass
from deplodock.passes.pipelines import STAGES, input_stage, is_below, pipeline_spec, stage_of

#: xDSL's own passes that make sense on deplodock IR at any level.
UPSTREAM_PASSES: tuple[str, ...] = ("canonicalize", "cse", "dce", "licm")


def strip_builtin_module(spec: str) -> str:
    """`builtin.module(a,b{x=1})` -> `a,b{x=1}` (xDSL rejects the MLIR wrapper)."""
    spec = spec.strip()
    match = re.fullmatch(r"builtin\.module\((.*)\)", spec, flags=re.DOTALL)
    return strip_builtin_module(match.group(1)) if match else spec


class PipelineError(ValueError):
    """A `-p`/`--pass-pipeline` this driver cannot run."""


def check_pipeline(spec: str) -> None:
    """Rejects, with one line, what xDSL would crash on or silently misread.

    MLIR nests pass managers (`func.func(cse)` runs `cse` on each function); deplodock's
    passes all run on the whole module, so a nested spec is refused with the flat spelling.
    Syntax errors surface here too, at the column of the spec as the user typed it.
    """
    nested = re.search(r"([\w.-]+)\(([^()]*)\)", spec)
    if nested:
        raise PipelineError(
            f"nested pass pipeline '{nested.group(0)}' is not supported (deplodock passes run "
            f"on the whole module): write -p '{nested.group(2)}'"
        )
    list(parse_pipeline(spec))


def check_pass_names(spec: str, available: Mapping[str, Callable[[], type[ModulePass]]]) -> None:
    """Rejects a pass or an option the pipeline names but no pass has, with the closest
    name (xDSL says `Unrecognized passes: ['tile-blok']`, or lists the expected options)."""
    for named in parse_pipeline(spec):
        if named.name not in available:
            raise PipelineError(f"{unknown_pass(named.name, available)}; --list-passes lists them")
        options = [field.name for field in dataclasses.fields(available[named.name]())]
        for option in named.normalize_parameter_names().parameters:  # max-recompute: ok
            if option not in options:
                offered = f"its options: {', '.join(options)}" if options else "it has none"
                raise PipelineError(
                    f"{named.name} has no option '{option}'{did_you_mean(option, options)}; "
                    f"{offered}"
                )


def pass_listing(available: Mapping[str, Callable[[], type[ModulePass]]]) -> str:
    """`--list-passes`: every pass as `-p` takes it, its options at their defaults
    (`tile-block{bm=0 bn=0 group=8 sms=132}`), then what it does, indented."""
    lines = []
    for name, loader in available.items():
        pass_class = loader()
        lines.append(str(pass_class().spec(include_default=True)))
        lines.append(f"    {pass_summary(name, pass_class)}")
    return "\n".join(lines) + "\n"


def pass_summary(name: str, pass_class: type[ModulePass]) -> str:
    """What a pass does, in a line: the first paragraph of its module's docstring when that
    is about it (`tile-block`: ...), else the first line of its own docstring."""
    module_doc = sys.modules[pass_class.__module__].__doc__ or ""
    head = " ".join(module_doc.strip().split("\n\n")[0].split())
    if head.startswith(f"`{name}`: "):
        return head.removeprefix(f"`{name}`: ")
    own = " ".join((pass_class.__doc__ or "").strip().split("\n\n")[0].split())
    origin = "" if pass_class.__module__.startswith("deplodock.") else "xDSL: "
    return origin + (own or "(no description)")


class _NotAnOption(argparse.Action):
    """`-v`, which xdsl-opt spends on its version: refused with the spellings that work."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.error(
            "-v is not an option: --version prints the version (as with mlir-opt); "
            "--mlir-print-ir-after-all or --print-pass-diffs show what the passes do"
        )


def note_stage_mismatch(pass_name: str, module: ModuleOp) -> None:
    """A pass the user named, given IR of another level, has nothing to do: say so on stderr
    rather than print the input unchanged in silence."""
    expected, actual = input_stage(pass_name), stage_of(module)
    if expected is not None and expected != actual:
        print(
            f"deplodock-opt: note: {pass_name} reads {expected}-level IR but the module is at "
            f"the {actual} level: it has nothing to do",
            file=sys.stderr,
        )


def note_stage_above(pass_names: Sequence[str], module: ModuleOp) -> None:
    """A `lower-to-<stage>` the user named, given IR already below `<stage>`, has nothing to
    do (passes only lower): say so on stderr, as `note_stage_mismatch` does for one pass,
    rather than print the input unchanged in silence. The stage is followed through the
    pipeline, so `lower-to-loop,lower-to-tensor` notes the second."""
    current = stage_of(module)
    for name in pass_names:
        stage = name.removeprefix("lower-to-")
        if not name.startswith("lower-to-") or stage not in STAGES:
            continue
        if is_below(current, stage):
            print(
                f"deplodock-opt: note: {name} lowers to the {stage} level but the module is "
                f"already at the {current} level: it has nothing to do",
                file=sys.stderr,
            )
        else:
            current = stage


def expand_stage_pipelines(spec: str) -> str:
    """Replaces each bare `lower-to-<stage>` by its passes, so every pass prints on its own."""
    parts = []
    for token in _split_top_level(spec):
        stage = token.removeprefix("lower-to-")
        if token.startswith("lower-to-") and stage in STAGES:
            token = pipeline_spec(stage)
        if token:
            parts.append(token)
    return ",".join(parts)


def _split_top_level(spec: str) -> list[str]:
    """Splits a pipeline at commas that are not inside `{...}` option groups."""
    parts, depth, current = [], 0, ""
    for char in spec:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return [part for part in parts if part]


class DeplodockOptMain(xDSLOptMain):
    #: `-o FILE`'s text, kept in memory until the run has succeeded.
    output: _KeptStringIO | None = None
    #: The passes named in `-p`, in order (not those a `lower-to-<stage>` expands to).
    named_passes: tuple[str, ...] = ()
    _verify: Callable[[ModulePass | None, ModuleOp, ModulePass | None], None] | None = None

    def register_all_dialects(self) -> None:
        for name, loader in get_all_dialects().items():
            self.ctx.register_dialect(name, loader)

    def register_all_passes(self) -> None:
        from xdsl.transforms import get_all_passes as upstream_passes

        upstream = upstream_passes()
        for name in UPSTREAM_PASSES:
            self.register_pass(name, upstream[name])
        for name, loader in get_all_passes().items():
            self.register_pass(name, loader)

    def register_all_targets(self) -> None:
        from xdsl.targets import get_all_targets

        self.available_targets["mlir"] = get_all_targets()["mlir"]
        self.available_targets["cuda"] = DEPLODOCK_UNIVERSE.all_targets["cuda"]

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.prog = "deplodock-opt"
        arg_parser.__class__ = OneLineArgumentParser  # xDSL builds it: usage errors in one line
        version = arg_parser.add_argument_group("version", conflict_handler="resolve")
        version.add_argument("--version", action=VersionAction, tool="deplodock-opt")
        version.add_argument("-v", action=_NotAnOption, help=argparse.SUPPRESS)  # xDSL's goes
        arg_parser.add_argument(
            "--list-passes",
            action="store_true",
            help="list every pass with its options (at their defaults) and what it does",
        )
        arg_parser.add_argument(
            "--pass-pipeline",
            dest="passes",
            type=str,
            help="alias of -p; also accepts the MLIR form 'builtin.module(a,b)'",
        )
        arg_parser.add_argument(
            "--mlir-print-ir-after-all",
            "--print-ir-after-all",
            dest="print_ir_after_all",
            action="store_true",
            help="print the IR after every pass (to stderr, as mlir-opt does)",
        )
        arg_parser.add_argument(
            "--print-pass-diffs",
            dest="print_pass_diffs",
            nargs="?",
            const="all",
            metavar="PASS",
            help="print, for every pass that changes the module (or only for PASS), its name "
            "and options and a unified diff of the IR, instead of the final module",
        )
        arg_parser.add_argument(
            "--traceback", action="store_true", help="show Python tracebacks on errors"
        )

    def setup_pipeline(self) -> None:
        spec = strip_builtin_module(self.args.passes or "")
        check_pipeline(spec)
        check_pass_names(spec, self.available_passes)
        only = self.args.print_pass_diffs
        if only not in (None, "all") and only not in self.available_passes:
            raise PipelineError(f"--print-pass-diffs: {unknown_pass(only, self.available_passes)}")
        self.named_passes = tuple(p.name for p in parse_pipeline(spec))
        self.args.passes = expand_stage_pipelines(spec)
        super().setup_pipeline()
        verify = self.pipeline.callback
        self._running = RunningPass(self._between_passes)
        self.pipeline = PassPipeline(self.pipeline.passes, self._running)
        self._verify = verify

    def _between_passes(
        self, previous: ModulePass | None, module: ModuleOp, next_pass: ModulePass | None
    ) -> None:
        if self._verify is not None:
            try:
                self._verify(previous, module, next_pass)
            except VerifyException as error:
                if previous is None:
                    raise
                # the input verified when it was parsed: the pass wrote the invalid IR
                raise InternalError(previous.name, None, error) from error
        if self.args.print_ir_after_all:
            self._print_after(previous, module, next_pass)
        if self.args.print_pass_diffs:
            self._differ(previous, module)
        if next_pass is not None and next_pass.name in self.named_passes:
            note_stage_mismatch(next_pass.name, module)

    def apply_passes(self, prog: ModuleOp) -> None:
        note_stage_above(self.named_passes, prog)
        super().apply_passes(prog)

    def prepare_output(self) -> IO[str]:
        """Collects the output in memory: `-o FILE` is written by `write_output`, at the end."""
        if self.args.output_file is None:
            return sys.stdout
        self.output = _KeptStringIO()
        return self.output

    def run(self) -> None:
        """`xDSLOptMain.run`, naming the input file in errors that cannot name it themselves."""
        try:
            with self._running.blaming():
                super().run()
        except (RecursionError, UnicodeDecodeError, VerifyException) as error:
            raise InputError(describe(error, self.get_input_name())) from None

    @property
    def _differ(self) -> PassDiffs:
        if not hasattr(self, "_pass_diffs"):
            only = self.args.print_pass_diffs
            self._pass_diffs = PassDiffs(None if only == "all" else only)
        return self._pass_diffs

    def output_resulting_program(self, prog: ModuleOp) -> str:
        """The `cuda` target prints kernel- or cuda-level IR only: anything above is one
        line, not an error deep in the printer. With `--print-pass-diffs`, the diffs."""
        if self.args.print_pass_diffs:
            return self._differ.text
        stage = stage_of(prog)
        if parse_spec(self.args.target).name == "cuda" and stage not in ("kernel", "cuda"):
            raise ValueError(
                f"-t cuda prints kernel- or cuda-level IR, the module is at the {stage} level: "
                "add -p lower-to-kernel"
            )
        return super().output_resulting_program(prog)

    def write_output(self) -> None:
        """Writes `-o FILE` once everything before it has succeeded, by `files.write_atomic`'s
        rule: atomically, and a failed write is one line (`cannot write PATH: REASON`)."""
        if self.args.output_file is not None:
            assert isinstance(self.output, _KeptStringIO)
            write_atomic(Path(self.args.output_file), self.output.kept)

    def _print_after(self, previous: ModulePass | None, module, _next: ModulePass | None) -> None:
        if previous is not None:
            print(f"// -----// IR Dump After {previous.name} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr).print_op(module)
            print("\n", file=sys.stderr)


class InputError(ValueError):
    """The input file cannot be read as IR (not UTF-8, nested too deeply) or does not verify."""


class _KeptStringIO(io.StringIO):
    """An in-memory output that keeps its text when xDSL closes it."""

    kept = ""

    def close(self) -> None:
        self.kept = self.getvalue()
        super().close()


def run_opt(args: Sequence[str]) -> int:
    opt = DeplodockOptMain(description="deplodock IR optimizer driver", args=args)
    if opt.args.list_passes:
        sys.stdout.write(pass_listing(opt.available_passes))
        return 0
    opt.run()
    opt.write_output()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_command(partial(run_opt, args), "deplodock-opt", "--traceback" in args)


if __name__ == "__main__":
    sys.exit(main())
