"""What `compile`, `run` and `tune` share: the source arguments (`-c EXPR`, a `.mlir` file or
a model, with the model options), loading the program they name, and checking an output path
(`-o`, `--html`, `--report`) before the work starts. Its own module so that `cli/main` and
`cli/tune` both import it and not each other.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deplodock.driver import Program


#: The model options and their defaults: given with a `-c` or `.mlir` source, they are an error.
_MODEL_DEFAULTS = {"layers": None, "seq_len": 128, "dtype": "fp32", "kv_len": None}


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "-c",
        "--code",
        metavar="EXPR",
        help="a PyTorch expression; deplodock executes it as Python, with your permissions "
        "(not a sandbox: give only code you would run yourself). A .mlir SOURCE is only "
        "parsed, never executed",
    )
    source.add_argument(
        "source",
        nargs="?",
        metavar="SOURCE",
        help="a .mlir file at any stage, a model id (Qwen/Qwen2.5-7B, ...: configs ship with "
        "deplodock, nothing is downloaded) or a model directory (config.json, *.safetensors)",
    )
    model = parser.add_argument_group("models")
    model.add_argument("--layers", type=int, help="keep the first N decoder layers")
    model.add_argument(
        "--seq-len",
        type=int,
        default=_MODEL_DEFAULTS["seq_len"],
        help="tokens per prompt (default: %(default)s)",
    )
    model.add_argument(
        "--kv-len",
        type=int,
        metavar="N",
        help="the decode step instead of the prompt: one new token over a KV cache of N rows "
        "(the step attends over all N; `deplodock generate` runs it token by token)",
    )
    model.add_argument(
        "--dtype",
        choices=("fp32", "bf16", "fp16"),
        default=_MODEL_DEFAULTS["dtype"],
        help="(default: %(default)s)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="report time per stage (compile: and, first, a diff of what each pass changed; "
        "-vv: the whole IR after every pass instead)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bars (they are only drawn when stderr is a terminal anyway)",
    )
    parser.add_argument("--traceback", action="store_true", help="show Python tracebacks")


def is_model(args: argparse.Namespace) -> bool:
    """SOURCE names a model (an id or a directory), not a `.mlir` file."""
    source: str | None = args.source
    return source is not None and not Path(source).is_file() and not source.endswith(".mlir")


def load_source(
    args: argparse.Namespace,
    seed: int = 0,
    cached: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Program:
    """The program named on the command line: `-c EXPR`, a `.mlir` file or a model; with
    `cached` (compile), an expression comes from the capture cache when it can; a model's
    capture phases are told to `progress`."""
    from deplodock.driver import compile_program_from_expression, load_program, program_from_model

    source: str | None = args.source
    if source is not None and source.endswith(".py"):
        raise ValueError(
            f"{source}: a .py file is not accepted: use -c EXPR or the Python API "
            "(deplodock.compile(module, example_inputs))"
        )
    if is_model(args):
        assert source is not None
        return program_from_model(
            source, args.layers, args.seq_len, args.dtype, seed, progress, args.kv_len
        )
    used = [f"--{k.replace('_', '-')}" for k, v in _MODEL_DEFAULTS.items() if getattr(args, k) != v]
    if used:
        raise ValueError(f"{', '.join(used)}: only for models (a model id or directory)")
    if cached and args.code is not None:
        return compile_program_from_expression(args.code, seed)
    return load_program(args.code, Path(source) if source is not None else None, seed=seed)


class OutputError(Exception):
    """An output path (`-o`, `--html`, `--report`) that cannot be written, found before the
    work starts (a write that fails later is `files.WriteError`)."""


def check_writable(path: Path, flag: str = "-o") -> None:
    """Fails early, with the reason, when `path` (given with `flag`) cannot be created or
    replaced; a device or fifo (`/dev/null`) is written in place, so its own permission
    counts, not its directory's."""
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise OutputError(f"{flag} {path}: is a directory")
    if path.exists() and not path.is_file():
        if not os.access(path, os.W_OK):
            raise OutputError(f"{flag} {path}: not writable")
        return
    if not directory.is_dir():
        raise OutputError(f"{flag} {path}: no directory {directory}")
    if not os.access(directory, os.W_OK):
        raise OutputError(f"{flag} {path}: directory {directory} is not writable")
