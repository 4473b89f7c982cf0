"""What many tests need: parse IR text, run `@forward` on any level, measure the error.

Tests run programs through `deplodock.backend.cpu_runner.run_on_cpu`, the same entry point the
CLI uses, so a test exercises exactly the interpreter a user gets.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from deplodock.backend.cpu_runner import run_on_cpu
from deplodock.dialects import make_context
from deplodock.dialects.queries import forward_function
from deplodock.numerics import max_relative_error, random_array

__all__ = ["kernel_abort", "parse", "random_inputs", "rel_err", "run", "tiny_llama"]

rel_err = max_relative_error


def parse(text: str, verify: bool = True) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    if verify:
        module.verify()
    return module


def run(module: ModuleOp | str, *inputs: np.ndarray) -> list[np.ndarray]:
    """Runs `@forward` of `module` (or of the IR text) on copies of `inputs`."""
    if isinstance(module, str):
        module = parse(module)
    return run_on_cpu(module, inputs)


def random_inputs(module: ModuleOp, seed: int) -> list[np.ndarray]:
    """Standard-normal float32 arrays, one per argument of `@forward`, from `seed`."""
    rng = np.random.default_rng(seed)
    shapes = [t.get_shape() for t in forward_function(module).function_type.inputs.data]
    return [random_array(rng, s, np.dtype(np.float32)) for s in shapes]


def tiny_llama() -> tuple[Any, torch.Tensor]:
    """A random 2-layer Llama (hidden 64, 4 heads, 2 KV heads, vocab 128) and 8 input ids:
    a whole Hugging Face causal LM small enough to interpret in a second."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from deplodock.frontend.models import randomize_weights

    config = AutoConfig.for_model(
        "llama",
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
    )
    torch.manual_seed(0)
    model = randomize_weights(AutoModelForCausalLM.from_config(config), seed=2).eval()
    input_ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))
    return model, input_ids


def fma_tile_pipeline() -> str:
    """The default tile passes (after `convert-loop-to-tile`) with fp32 products kept on the
    FMA pipe (`tile-thread{tf32x3=0}`): for tests about the FMA schedule of an fp32 GEMM,
    which by default multiplies as tf32x3 on tensor cores."""
    from deplodock.passes.pipelines import STAGE_PASSES

    names = STAGE_PASSES["tile"][1:]
    return ",".join("tile-thread{tf32x3=0}" if n == "tile-thread" else n for n in names)


def kernel_abort(
    source: str, name: str, args: str, grid: int = 1, block: int = 32, setup: str = ""
) -> str:
    """The stderr of `run_kernel(source, name, ARGS, grid, block)` run in a child process, which
    must fail (the CPU emulation aborts on what it reports; the test reads why). `args` is the
    Python expression of the argument list, `np` in scope, after the statements `setup`."""
    script = (
        "import numpy as np\n"
        "from deplodock.backend.cpu_runner import run_kernel\n"
        f"{setup}"
        f"run_kernel({source!r}, {name!r}, {args}, grid={grid}, block={block})\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode != 0, result.stdout
    return result.stderr
