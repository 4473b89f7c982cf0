"""What a new user still tripped on (issue #39, item 9): usage errors, versions, typos in pass
names, the pass list, a mixed-dtype Linear, a `.py` source and a knob of 0. Run in-process
(`tests/cli/invoke.py`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deplodock.passes import DEPLODOCK_PASSES
from deplodock.passes.pipelines import STAGE_PASSES
from tests.cli.invoke import assert_one_line_error, invoke

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "rmsnorm.mlir"
LINEAR = "nn.Linear(256, 256)(torch.randn(64, 256))"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["deplodock", "compile", str(EXAMPLE), "--ir", "cudaa"], "invalid choice: 'cudaa'"),
        (["deplodock"], "deplodock: error: the following arguments are required: COMMAND"),
        (["deplodock", "run", "-c", "torch.randn(3)", "--seed", "one"], "invalid int value"),
        (["deplodock-opt", str(EXAMPLE), "--frobnicate"], "unrecognized arguments"),
        (["deplodock-opt", str(EXAMPLE), "-t", "ptx"], "deplodock-opt: error: argument -t"),
    ],
    ids=["choice", "no-command", "not-int", "opt-flag", "opt-target"],
)
def test_usage_errors_are_one_line_and_exit_1(argv: list[str], fragment: str) -> None:
    """argparse printed 7-12 lines of usage before its message, and exited 2."""
    assert_one_line_error(invoke(argv[0], argv[1:]), fragment)


def test_both_tools_print_their_version() -> None:
    for tool in ("deplodock", "deplodock-opt"):
        result = invoke(tool, ["--version"])
        assert result.status == 0 and not result.stderr, result.output
        assert re.fullmatch(rf"{tool} \S+ \(xdsl \S+, torch \S+, python \S+\)\n", result.stdout), (
            result.stdout
        )


def test_v_is_verbose_in_deplodock_and_no_option_in_deplodock_opt() -> None:
    """xdsl-opt's `-v` printed the version where `deplodock -v` means verbose; as in
    mlir-opt, the version is `--version` only."""
    assert_one_line_error(
        invoke("deplodock-opt", ["-v"]),
        "deplodock-opt: error: -v is not an option: --version prints the version",
    )
    verbose = invoke("deplodock", ["compile", str(EXAMPLE), "--ir", "torch", "-v"])
    assert verbose.status == 0 and "total" in verbose.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["deplodock-opt", str(EXAMPLE), "-p", "tile-blok"],
            "unknown pass 'tile-blok' (did you mean 'tile-block'?); --list-passes lists them",
        ),
        (
            ["deplodock-opt", str(EXAMPLE), "-p", "lower-to-loop,tile-block{bmm=64}"],
            "tile-block has no option 'bmm' (did you mean 'bm'?); its options: bm, bn, group, sms",
        ),
        (
            ["deplodock-opt", str(EXAMPLE), "--print-pass-diffs", "loop-fusio"],
            "--print-pass-diffs: unknown pass 'loop-fusio' (did you mean 'loop-fusion'?)",
        ),
        (
            ["deplodock", "compile", str(EXAMPLE), "--print-pass-diffs", "tile-blok"],
            "--print-pass-diffs: unknown pass 'tile-blok' (did you mean 'tile-block'?)",
        ),
    ],
    ids=["pass", "option", "opt-diffs", "compile-diffs"],
)
def test_a_mistyped_pass_or_option_gets_the_closest_name(argv: list[str], message: str) -> None:
    result = invoke(argv[0], argv[1:])
    assert_one_line_error(result, message)
    assert result.stderr.startswith(f"{argv[0]}: error: ")


def test_list_passes_gives_each_pass_its_options_and_what_it_does() -> None:
    result = invoke("deplodock-opt", ["--list-passes"])
    assert result.status == 0, result.output
    lines = result.stdout.splitlines()
    names = [line.split("{")[0] for line in lines[::2]]
    assert set(DEPLODOCK_PASSES) <= set(names) and {"cse", "canonicalize"} <= set(names)
    assert all(line.startswith("    ") and line.strip() for line in lines[1::2])
    block = lines.index("tile-block{bm=0 bn=0 group=8 sms=132}")
    assert lines[block + 1] == (
        "    each block of the grid computes one BM x BN tile of a contraction's output."
    )
    assert "--list-passes" in invoke("deplodock-opt", ["--help"]).stdout


def test_a_mixed_dtype_linear_is_not_an_unsupported_op() -> None:
    """It was `unsupported op aten.linear.default (1x in 0) ... (imported as
    tensor<2x4xbf16>, PyTorch says tensor<2x4xf32>)`."""
    result = invoke("deplodock", ["compile", "-c", "nn.Linear(4, 4)(torch.randn(2, 4).bfloat16())"])
    assert_one_line_error(
        result,
        "aten.linear.default at forward: node linear mixes dtypes (x0 is torch.bfloat16, "
        "p_0_weight is torch.float32",
        "convert the tensor or the module",
    )
    assert "unsupported" not in result.stderr


@pytest.mark.parametrize("exists", [True, False])
def test_a_python_file_is_refused_with_the_ways_that_work(exists: bool, tmp_path: Path) -> None:
    """`compile model.py` was an MLIR parse error at `import torch` (or, for a missing
    file, an unknown model)."""
    model = tmp_path / "model.py"
    if exists:
        model.write_text("import torch\n")
    assert_one_line_error(
        invoke("deplodock", ["compile", str(model)]),
        f"{model}: a .py file is not accepted: use -c EXPR or the Python API",
    )


def tile_pipeline(*inserted: str) -> str:
    """The tile stage from the loop level, with `inserted` passes after its first."""
    first, *rest = STAGE_PASSES["tile"]
    return ",".join([first, *inserted, *rest])


@pytest.fixture(scope="module")
def linear_loop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("linear") / "linear.loop.mlir"
    result = invoke("deplodock", ["compile", "-c", LINEAR, "--ir", "loop", "-o", str(path)])
    assert result.status == 0, result.output
    return path


@pytest.mark.parametrize("knob", ["bm", "fm", "threads"])
def test_a_knob_of_0_is_an_error(knob: str, linear_loop: Path) -> None:
    """A knob is the decision itself: bm=0 was refused by tile-block only, fm=0 crashed
    tile-thread (an internal error) and threads=0 was silently replaced by 256."""
    pipeline = tile_pipeline(f'tile-schedule{{knobs="{knob}=0"}}')
    assert_one_line_error(
        invoke("deplodock-opt", [str(linear_loop), "-p", pipeline]),
        f"tile-schedule: knob {knob}=0: must be positive (leave the knob out for the "
        "heuristic's choice)",
    )


def test_an_option_of_0_still_means_the_heuristics_choice(linear_loop: Path) -> None:
    heuristic = invoke("deplodock-opt", [str(linear_loop), "-p", tile_pipeline()])
    zeros = tile_pipeline().replace("tile-block", "tile-block{bm=0 bn=0}", 1)
    zeros = zeros.replace("tile-thread", "tile-thread{fm=0 fn=0}", 1)
    explicit = invoke("deplodock-opt", [str(linear_loop), "-p", zeros])
    assert heuristic.status == explicit.status == 0, explicit.output
    assert explicit.stdout == heuristic.stdout
