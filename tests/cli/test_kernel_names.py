"""One kernel, one name, in every report (issue #39, item 6).

A kernel is named after its main work and then its output (`passes/fused_names.py`): the
MLP's gate projection with its SiLU epilogue is `linear_silu_kernel`, the down projection
with the residual add `linear_add_kernel` (they read `silu_kernel` and `add_kernel`, after
the op the fusion kept), and attention's two kernels are told apart. `compile`, `tune`,
`run --profile` and the tune cache print the same names, whole, and count launches alike.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.invoke import invoke

#: x + down(silu(gate(x)) * up(x)), with 512 output columns: SiLU is the gate's epilogue.
MLP = (
    "nn.Linear(256, 512, bias=False)(F.silu(nn.Linear(512, 256, bias=False)(torch.randn(8, "
    "512))) * nn.Linear(512, 256, bias=False)(torch.randn(8, 512))) + torch.randn(8, 512)"
)
#: Attention over 72 keys, not whole chunks of 16: its scores keep a kernel of their own
#: (`loop-fusion`'s score matrix fuses over whole chunks only), so there are two to tell apart.
#: Attention of a few queries (fewer than a 16-row tile, as when decoding): its scores,
#: softmax and product stay three kernels (a prompt's attention is one).
ATTENTION = (
    "F.scaled_dot_product_attention(torch.randn(1, 4, 8, 32), torch.randn(1, 4, 72, 32), "
    "torch.randn(1, 4, 72, 32))"
)
GLOBAL = re.compile(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(")
#: A two-layer model: each layer's kernels are launched twice.
TINY_LLAMA = Path(__file__).parents[2] / "docs/examples/tiny-llama"
TUNE_HEADER = re.compile(r"tune: (\d+) kernel\(s\), (\d+) launch\(es\)")


def loop_kernels(expression: str) -> list[str]:
    result = invoke("deplodock", ["compile", "-c", expression, "--ir", "loop"])
    assert result.status == 0, result.stderr
    return re.findall(r"loop\.kernel @(\w+)", result.stdout)


def table_names(text: str) -> list[str]:
    """The first column of a report's rows: the names ending in `_kernel...`."""
    return re.findall(r"^  (\w+_kernel\w*) ", text, re.MULTILINE)


def test_kernels_are_named_after_their_main_work() -> None:
    assert loop_kernels(MLP) == ["linear_silu_kernel", "linear_kernel", "linear_add_kernel"]


def test_the_attention_kernels_are_told_apart() -> None:
    assert loop_kernels(ATTENTION) == [
        "attention_scores_kernel",
        "attention_softmax_kernel",
        "scaled_dot_product_attention_kernel",
    ]


def test_every_report_prints_the_same_names_whole(tmp_path: Path) -> None:
    db = tmp_path / "tune.db"
    compiled = invoke("deplodock", ["compile", "-c", ATTENTION, "--no-tuned"])
    cuda = set(GLOBAL.findall(compiled.stdout))
    tuned = invoke("deplodock", ["tune", "-c", ATTENTION, "--cache-db", str(db), "--trials", "1"])
    assert tuned.status == 0, tuned.stderr
    profile = invoke("deplodock", ["run", "--profile", "--model", "h100", "-c", ATTENTION])
    assert profile.status == 0, profile.stderr
    listed = invoke("deplodock", ["cache", "ls", "--cache-db", str(db)])
    names = set(loop_kernels(ATTENTION))
    assert set(table_names(tuned.stdout)) == names == set(table_names(listed.stdout))
    assert set(table_names(profile.stdout)) == cuda
    # what the cuda level adds to the loop kernels is named after one of them
    assert all(any(name.startswith(f"{k}_") for k in names) for name in cuda - names), cuda


def test_tune_counts_launches(tmp_path: Path) -> None:
    """`n` is the launches of the kernel, as the guide says (it was always 1): a two-layer
    model runs each layer's kernels twice, and the rows add up to the header's launches."""
    db = tmp_path / "tune.db"
    args = ["tune", str(TINY_LLAMA), "--layers", "2", "--cache-db", str(db), "--trials", "1"]
    result = invoke("deplodock", args)
    assert result.status == 0, result.stderr
    header = TUNE_HEADER.search(result.stdout)
    assert header is not None, result.stdout
    lines = result.stdout[header.end() :].splitlines()
    rows = [line.split() for line in lines if line.startswith("  ") and "_kernel" in line]
    counts = [int(row[1]) for row in rows]
    assert len(counts) == int(header[1])
    assert sum(counts) == int(header[2])
    assert 2 in counts and 1 in counts  # a layer's kernel; the embedding, the LM head
    assert all(n == 1 or n % 2 == 0 for n in counts)  # every layer kernel runs in both
