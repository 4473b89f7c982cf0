"""`deplodock-opt`: the MLIR-style driver over textual deplodock IR.

It is xDSL's `xdsl-opt` with deplodock's dialects, passes and `cuda` target, plus what an MLIR
user types by habit: `--pass-pipeline='builtin.module(a,b)'` and `--mlir-print-ir-after-all`.
Errors print as one diagnostic (with `file:line:column` for parse errors) and exit 1, without
a Python traceback unless `--traceback` is given.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from deplodock.cli.errors import report_error
from deplodock.dialects import get_all_dialects
from deplodock.passes import get_all_passes
from deplodock.passes.pipelines import STAGES, pipeline_spec

#: xDSL's own passes that make sense on deplodock IR at any level.
UPSTREAM_PASSES: tuple[str, ...] = ("canonicalize", "cse", "dce", "licm")


def strip_builtin_module(spec: str) -> str:
    """`builtin.module(a,b{x=1})` -> `a,b{x=1}` (xDSL rejects the MLIR wrapper)."""
    spec = spec.strip()
    match = re.fullmatch(r"builtin\.module\((.*)\)", spec, flags=re.DOTALL)
    return strip_builtin_module(match.group(1)) if match else spec


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


def _cuda_target() -> type:
    """The `cuda` target (whole translation unit), imported only when asked for."""
    from deplodock.backend.cuda_source import CudaTarget

    return CudaTarget


class DeplodockOptMain(xDSLOptMain):
    version_format = "deplodock-opt on xdsl {xdsl_version}"

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
        self.available_targets["cuda"] = _cuda_target

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
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
            "--traceback", action="store_true", help="show Python tracebacks on errors"
        )

    def setup_pipeline(self) -> None:
        self.args.passes = expand_stage_pipelines(strip_builtin_module(self.args.passes or ""))
        super().setup_pipeline()
        if self.args.print_ir_after_all:
            self.pipeline = PassPipeline(self.pipeline.passes, self._print_after)

    def _print_after(self, previous: ModulePass | None, module, _next: ModulePass | None) -> None:
        if not self.args.disable_verify:
            module.verify()
        if previous is not None:
            print(f"// -----// IR Dump After {previous.name} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr).print_op(module)
            print("\n", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        DeplodockOptMain(description="deplodock IR optimizer driver", args=args).run()
    except (ParseError, DiagnosticException, ValueError, OSError) as error:
        if "--traceback" in args:
            raise
        return report_error(error, tool="deplodock-opt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
