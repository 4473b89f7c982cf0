"""`deplodock-opt --print-pass-diffs[=PASS]`: the diff of each pass that changed the module."""

from __future__ import annotations

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
