"""Where programs come from: a `-c` expression (captured, or from the capture cache), a
`.mlir` file, or a Hugging Face causal LM; each with the reference `run` compares it with.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, ShapedType
from xdsl.ir import Attribute, Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from deplodock.dialects import make_context
from deplodock.dialects.element_types import is_narrow_float, numpy_dtype
from deplodock.dialects.queries import forward_function
from deplodock.driver.lowering import render
from deplodock.driver.program import Program, StageProgress, announce_phase
from deplodock.numerics import (
    FILE_TOLERANCES,
    MODEL_TOLERANCES,
    NARROW_FLOAT_TOLERANCE,
    random_array,
)
from deplodock.passes.pipelines import stage_of

if TYPE_CHECKING:
    import torch
    from torch.export import ExportedProgram


def load_program(code: str | None, path: Path | None, seed: int = 0) -> Program:
    """A program from a `-c` expression or a `.mlir` file."""
    if code is not None:
        return program_from_expression(code, seed)
    assert path is not None
    return program_from_file(path)


def program_from_expression(code: str, seed: int = 0) -> Program:
    from deplodock.frontend.capture import capture
    from deplodock.frontend.expression import parse_expression

    torch_module, example_inputs, _ = parse_expression(code, seed=seed)
    start = time.perf_counter()
    module = capture(torch_module, example_inputs)
    program = Program(module, "torch", torch_module, tuple(example_inputs))
    program.timings["torch"] = time.perf_counter() - start
    if any(is_narrow_float(getattr(t, "element_type", None)) for t in _forward_types(module)):
        program.tolerance = NARROW_FLOAT_TOLERANCE  # bf16/f16 round where PyTorch does not
    return program


def compile_program_from_expression(code: str, seed: int = 0) -> Program:
    """`compile -c`: the torch-level module from the capture cache when it has this
    expression (no torch import: `driver.capture_cache`), else a fresh capture, kept for the
    next compile. The program has no PyTorch module, so it cannot be `run`."""
    from deplodock.driver import capture_cache

    start = time.perf_counter()
    text = capture_cache.load_cached(code, seed)
    if text is not None:
        try:
            module = Parser(make_context(), text, "<capture cache>").parse_module()
            module.verify()
        except (ParseError, VerifyException):  # a damaged or foreign entry: capture again
            text = None
        else:
            program = Program(module, "torch")
            program.timings["torch"] = time.perf_counter() - start
            return program
    program = program_from_expression(code, seed)
    capture_cache.store(code, seed, render(program.module, "torch"))
    return program


def program_from_model(
    name: str,
    layers: int | None = None,
    seq_len: int = 128,
    dtype: str = "fp32",
    seed: int = 0,
    progress: StageProgress | None = None,
    kv_len: int | None = None,
) -> Program:
    """A Hugging Face causal LM (shipped id or local directory) captured on the meta device:
    its forward over a prompt of `seq_len` tokens, or with `kv_len`, its decode step (one
    new token over a KV cache of `kv_len` rows, `frontend/generation.py`).

    Timings: `model` (config + meta-device construction) and `torch` (export + import).
    """
    from deplodock.frontend import models

    announce_phase(progress, "model")
    start = time.perf_counter()
    source = models.resolve_model(name)
    config = models.make_config(source, layers)
    models.check_seq_len(source, config, seq_len)
    if kv_len is not None:
        models.check_seq_len(source, config, kv_len, "--kv-len")
    if dtype not in models.DTYPES:
        raise ValueError(f"unknown dtype '{dtype}' (expected {', '.join(models.DTYPES)})")
    lm = models.build_causal_lm(config, models.DTYPES[dtype], device="meta")
    input_ids = models.example_input_ids(config.vocab_size, seq_len, seed)
    built = time.perf_counter()
    announce_phase(progress, "torch")
    if kv_len is None:
        program, _ = capture_causal_lm(lm, (input_ids,))
        program.reference = partial(_model_reference, program, source, config, seq_len)
    else:
        program, _ = capture_kv_step(lm, kv_len, decode_inputs(config, kv_len, dtype, "meta"))
        program.reference = partial(_decode_reference, program, source, config, kv_len)
    program.timings["model"] = built - start
    program.timings["torch"] = time.perf_counter() - built
    program.name = models.describe(source, config, seq_len, models.DTYPES[dtype], kv_len)
    program.tolerance = MODEL_TOLERANCES[dtype]
    return program


def decode_inputs(
    config: Any, kv_len: int, dtype: str, device: str = "cpu", seed: int = 0
) -> tuple[torch.Tensor, ...]:
    """A decode step's inputs: one token id, the last position of the cache (the step attends
    over every row), and the caches (random normal, or unfilled on `meta`)."""
    import torch

    from deplodock.frontend import generation, models

    ids = models.example_input_ids(config.vocab_size, 1, seed).to(device)
    position = torch.tensor([kv_len - 1], dtype=torch.int64).to(device)
    caches = generation.empty_caches(config, kv_len, models.DTYPES[dtype], device)
    if device != "meta":
        generator = torch.Generator().manual_seed(seed)
        caches = [torch.randn(c.shape, generator=generator).to(c.dtype) for c in caches]
    return (ids, position, *caches)


def capture_causal_lm(
    lm: torch.nn.Module, example_inputs: Sequence[torch.Tensor]
) -> tuple[Program, ExportedProgram]:
    """A transformers causal LM as the torch-level program of `forward(input_ids) -> logits`,
    its decoder layers marked for stamping, and the exported program it was imported from
    (`deplodock.compile` needs its constants and output dtypes)."""
    from deplodock.frontend import models
    from deplodock.frontend.capture import export, import_exported_program

    wrapper = models.CausalLMLogits(lm)
    op_paths: dict[Operation, str] = {}
    with models.capture_ready(lm):
        ep = export(wrapper, example_inputs)
        module = import_exported_program(ep, op_paths=op_paths)
    program = Program(module, "torch", wrapper, tuple(example_inputs))
    program.layer_prefix, program.op_paths = models.LAYER_PREFIX, op_paths
    return program, ep


def capture_kv_step(
    lm: torch.nn.Module, max_len: int, example_inputs: Sequence[torch.Tensor]
) -> tuple[Program, ExportedProgram]:
    """One generation step of a transformers causal LM over a KV cache of `max_len` rows
    (`frontend/generation.py`), captured for the steps' token count in `example_inputs`
    (`input_ids, position, k_0, v_0, ...`), with its decoder layers marked for stamping as
    `capture_causal_lm` marks them."""
    from deplodock.frontend import generation, models
    from deplodock.frontend.capture import export, import_exported_program

    step = generation.KvCacheStep(lm, max_len)
    op_paths: dict[Operation, str] = {}
    with models.capture_ready(lm), generation.kv_attention_selected(lm):
        ep = export(step, example_inputs)
        module = import_exported_program(ep, op_paths=op_paths)
    program = Program(module, "torch", step, tuple(example_inputs))
    program.layer_prefix, program.op_paths = models.LAYER_PREFIX, op_paths
    return program, ep


#: `run` builds the transformers reference on the CPU and interprets every kernel: tiny only.
MAX_RUN_PARAMETERS = 200_000_000


def _model_reference(
    program: Program, source: object, config: object, seq_len: int, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Binds the checkpoint (or seeded random weights) by name; transformers' logits in f64."""
    from deplodock.frontend import models
    from deplodock.frontend.weights import bind_arguments

    reference, weights, buffers = _bound_reference(program, source, config, seed)
    input_ids = models.example_input_ids(config.vocab_size, seq_len, seed)  # type: ignore[attr-defined]
    arguments = bind_arguments(program.module, [input_ids], weights, buffers)
    logits = models.reference_logits(reference, input_ids)
    return arguments, [logits.numpy()]


def _decode_reference(
    program: Program, source: object, config: Any, kv_len: int, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The decode step in float64 in PyTorch (the model's own layers, `KvCacheStep`) on the
    checkpoint or seeded random weights, random caches and the cache's last position."""
    import copy

    import torch

    from deplodock.frontend import generation
    from deplodock.frontend.weights import bind_arguments

    reference, weights, buffers = _bound_reference(program, source, config, seed)
    inputs = decode_inputs(config, kv_len, "fp32", seed=seed)
    arguments = bind_arguments(program.module, list(inputs), weights, buffers)
    wide = copy.deepcopy(reference).double()
    step = generation.KvCacheStep(wide, kv_len)
    with torch.no_grad(), generation.kv_attention_selected(wide):
        outputs = step(inputs[0], inputs[1], *(c.double() for c in inputs[2:]))
    return arguments, [out.numpy() for out in outputs]


def _bound_reference(
    program: Program, source: object, config: Any, seed: int
) -> tuple[torch.nn.Module, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """What `run` compares a model's program with: the transformers model (refused past
    `MAX_RUN_PARAMETERS`), the weights bound to it by name and its buffers; `program.weights`
    says which weights they are."""
    from deplodock.frontend import models

    assert isinstance(source, models.ModelSource) and program.torch_module is not None
    count = sum(p.numel() for p in program.torch_module.parameters())
    if count > MAX_RUN_PARAMETERS:
        raise ValueError(
            f"{source.name} has {count:.2e} parameters: too many to interpret on the CPU "
            f"(at most {MAX_RUN_PARAMETERS:.0e}); run a smaller model"
        )
    reference = models.reference_model(source, config, seed)
    weights = models.checkpoint_weights(source, reference)
    program.weights = _weights_used(source, seed)
    buffers = {name: b.detach() for name, b in reference.named_buffers()}
    return reference, weights, buffers


def _weights_used(source: object, seed: int) -> str:
    """What `run`'s verdict says of the weights (`checkpoint_weights` binds a directory's
    safetensors, else the reference's seeded random parameters: a model id downloads none)."""
    from deplodock.frontend.weights import safetensors_files

    directory = getattr(source, "directory", None)
    if directory is not None and safetensors_files(directory):
        return f"the checkpoint's weights ({directory})"
    where = "no safetensors in the directory" if directory is not None else "none downloaded"
    return f"random weights, seed {seed} ({where})"


def program_from_file(path: Path) -> Program:
    """A `.mlir` file: parsed and verified, never executed. Its reference (`run`) is the
    file's own level interpreted on random inputs."""
    try:
        text = path.read_text()
    except OSError as error:
        raise OSError(f"cannot read {path}: {error.strerror}") from None
    if not text.strip():
        raise ValueError(f"{path} is empty: no IR to compile")
    module = Parser(make_context(), text, str(path)).parse_module()
    module.verify()
    program = Program(module, stage_of(module))
    program.reference = partial(_own_level_reference, module.clone())
    program.reference_stage = program.stage
    narrow = any(is_narrow_float(getattr(t, "element_type", None)) for t in _forward_types(module))
    program.tolerance = FILE_TOLERANCES["narrow" if narrow else "fp32"]
    return program


def _forward_types(module: ModuleOp) -> list[Attribute]:
    function_type = forward_function(module).function_type
    return [*function_type.inputs.data, *function_type.outputs.data]


def _own_level_reference(
    original: ModuleOp, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Random `@forward` arguments and the outputs of the unlowered module on them."""
    from deplodock.backend.cpu_runner import run_on_cpu

    arguments = random_arguments(original, seed)
    return arguments, run_on_cpu(original.clone(), arguments)


def random_arguments(module: ModuleOp, seed: int) -> list[np.ndarray]:
    """Random values of `@forward`'s arguments, for a program without PyTorch inputs.

    `numerics.random_array`'s values: floats standard normal, booleans fair coins, integers
    zeros, the one value valid as any index (a `gather`'s indices), so a file's integer
    inputs are exercised only weakly.
    """
    rng = np.random.default_rng(seed)
    arguments = []
    for arg_type in forward_function(module).function_type.inputs.data:
        assert isinstance(arg_type, ShapedType)
        dtype = numpy_dtype(arg_type.get_element_type())
        arguments.append(random_array(rng, arg_type.get_shape(), dtype))
    return arguments
