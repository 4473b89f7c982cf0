"""`deplodock-opt --print-pass-diffs[=PASS]`: the diff of each pass that changed the module."""

from __future__ import annotations

from tests.cli.invoke import assert_one_line_error, invoke
from tests.docs_examples import run_command

EXAMPLE = "docs/examples/linear.tile.mlir"


def test_every_changing_pass_is_listed_once_with_its_options() -> None:
    out = run_command(
        f"deplodock-opt {EXAMPLE} -p 'tile-block{{bm=16 bn=16}},tile-rows-to-blocks,"
        "tile-thread{fm=2 fn=2}' --print-pass-diffs"
    )
    headers = [line for line in out.splitlines() if line.startswith("// ---- ")]
    # tile-rows-to-blocks changes nothing on a tiled contraction: it is not listed.
    assert headers == ["// ---- tile-block{bm=16 bn=16}", "// ---- tile-thread{fm=2 fn=2}"]
    assert "+      %m0, %n0 = tile.block_tile %b counts [2, 1] sizes [16, 16] group 8" in out
    assert "-      tile.threads %t to 32 {" in out


def test_one_pass_only() -> None:
    out = run_command(
        f"deplodock-opt {EXAMPLE} -p 'tile-block{{bm=16 bn=16}},tile-thread{{fm=2 fn=2}}' "
        "--print-pass-diffs=tile-thread"
    )
    assert out.startswith("// ---- tile-thread{fm=2 fn=2}\n")
    assert "tile-block" not in out.splitlines()[0]


def test_a_pass_that_changes_nothing_says_so() -> None:
    out = run_command(f"deplodock-opt {EXAMPLE} -p tile-stage --print-pass-diffs")
    assert out == "// no pass changed the module\n"


# --- `deplodock compile`: --print-pass-diffs[=PASS] and -v ---------------------------------

LINEAR = "nn.Linear(32, 16)(torch.randn(20, 32))"


def test_compile_prints_the_diffs_instead_of_the_program() -> None:
    result = invoke("deplodock", ["compile", "-c", LINEAR, "--ir", "tile", "--print-pass-diffs"])
    assert result.status == 0, result.output
    headers = [line for line in result.stdout.splitlines() if line.startswith("// ---- ")]
    assert headers[:2] == ["// ---- convert-torch-to-tensor", "// ---- convert-tensor-to-loop"]
    assert "// ---- tile-block" in headers and "// ---- tile-async-copy" in headers
    assert not any("convert-tile-to-kernel" in h for h in headers)  # --ir tile stops there
    assert "+      %m0, %n0 = tile.block_tile %b" in result.stdout


def test_compile_one_pass_only() -> None:
    result = invoke(
        "deplodock", ["compile", "-c", LINEAR, "--ir", "kernel", "--print-pass-diffs=tile-thread"]
    )
    assert result.status == 0, result.output
    assert result.stdout.startswith("// ---- tile-thread\n")
    assert result.stdout.count("// ---- ") == 1


def test_compile_verbose_keeps_stdout_the_program_and_diffs_to_stderr() -> None:
    plain = invoke("deplodock", ["compile", "-c", LINEAR, "--ir", "kernel"])
    verbose = invoke("deplodock", ["compile", "-c", LINEAR, "--ir", "kernel", "-v"])
    assert verbose.status == 0, verbose.output
    assert verbose.stdout == plain.stdout
    assert "// ---- tile-block\n" in verbose.stderr
    assert "// ---- convert-tile-to-kernel\n" in verbose.stderr
    assert verbose.stderr.rstrip().splitlines()[-1].lstrip().startswith("total")
    assert "// ----" not in plain.stderr


def test_compile_very_verbose_prints_the_ir_after_every_pass() -> None:
    """-vv: the whole module after each pass, the unchanging ones (loop-sibling-fusion,
    dedupe-kernels) too."""
    result = invoke("deplodock", ["compile", "-c", LINEAR, "--ir", "loop", "-vv"])
    assert result.status == 0, result.output
    headers = [line for line in result.stderr.splitlines() if line.startswith("// ---- ")]
    assert headers == [
        "// ---- IR after convert-torch-to-tensor",
        "// ---- IR after convert-tensor-to-loop",
        "// ---- IR after loop-fusion",
        "// ---- IR after loop-sibling-fusion",
        "// ---- IR after dedupe-kernels",
    ]
    after_fusion = result.stderr.split("// ---- IR after loop-fusion\n")[1]
    assert after_fusion.split("// ---- ")[0].strip() == result.stdout.strip()
    assert "@@" not in result.stderr  # whole modules, not diffs


def test_compile_names_an_unknown_pass() -> None:
    result = invoke("deplodock", ["compile", "-c", LINEAR, "--print-pass-diffs=tile-blok"])
    assert_one_line_error(result, "--print-pass-diffs", "unknown pass 'tile-blok'")
