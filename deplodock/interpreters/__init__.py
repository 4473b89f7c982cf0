"""CPU semantics of every level: run `@forward` of a module at any stage on numpy arrays.

Each dialect has its interpreter functions in a module of this package; `make_interpreter`
registers all of them, plus xDSL's `func` implementation and our numpy `arith`/`math`, into
one xDSL `Interpreter`. The same call then runs a program whatever its level, which is what
lets the tests compare every stage of a lowering with PyTorch.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module

import numpy as np
from xdsl.dialects.builtin import MemRefType, ModuleOp, TensorType
from xdsl.interpreter import Interpreter, InterpreterFunctions
from xdsl.interpreters.func import FuncFunctions

from deplodock.dialects.element_types import numpy_dtype
from deplodock.dialects.queries import forward_function
from deplodock.interpreters.arith import ArithMathFunctions
from deplodock.interpreters.common import (
    BlockProgress,
    set_block_progress,
    set_blocks_per_batch,
)
from deplodock.interpreters.cuda import CudaFunctions, KernelRunner

#: (module, class) of each dialect's interpreter functions above the cuda level.
DIALECT_FUNCTIONS: tuple[tuple[str, str], ...] = (
    ("deplodock.interpreters.torch", "TorchFunctions"),
    ("deplodock.interpreters.tensor", "TensorFunctions"),
    ("deplodock.interpreters.loop", "LoopFunctions"),
    ("deplodock.interpreters.tile", "TileFunctions"),
    ("deplodock.interpreters.kernel", "KernelFunctions"),
    ("deplodock.interpreters.tma", "TmaFunctions"),
    ("deplodock.interpreters.wgmma", "WgmmaFunctions"),
)


def _dialect_functions(cuda_runner: KernelRunner | None) -> list[InterpreterFunctions]:
    functions: list[InterpreterFunctions] = []
    for module_name, class_name in DIALECT_FUNCTIONS:
        functions_class = getattr(import_module(module_name), class_name)
        functions.append(functions_class())
    functions.append(CudaFunctions(cuda_runner))
    return functions


def make_interpreter(module: ModuleOp, cuda_runner: KernelRunner | None = None) -> Interpreter:
    """An interpreter for `module` that knows every deplodock dialect; `cuda.launch` runs
    the kernel's C with `cuda_runner` (see `interpreters/cuda.py`)."""
    interpreter = Interpreter(module)
    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(ArithMathFunctions())
    for functions in _dialect_functions(cuda_runner):
        interpreter.register_implementations(functions)
    return interpreter


def _as_argument(value: np.ndarray, arg_type: object, position: int) -> np.ndarray:
    """Checks shape and dtype of one input and copies it, so the caller's array stays intact."""
    if not isinstance(arg_type, MemRefType | TensorType):
        raise TypeError(f"@forward argument #{position} has unsupported type {arg_type}")
    shape = tuple(arg_type.get_shape())
    array = np.asarray(value)
    if array.shape != shape:
        raise ValueError(
            f"@forward argument #{position}: expected shape {shape}, got {array.shape}"
        )
    return np.array(array, dtype=numpy_dtype(arg_type.element_type), copy=True)


def run_module(
    module: ModuleOp,
    inputs: Sequence[np.ndarray],
    function: str = "forward",
    cuda_runner: KernelRunner | None = None,
    progress: BlockProgress | None = None,
    blocks_per_batch: int | None = None,
) -> list[np.ndarray]:
    """Runs `@function` of `module` on `inputs` (in argument order) and returns its results.

    A cuda-level module needs `cuda_runner`; `backend.cpu_runner.run_on_cpu` passes the
    CPU emulation of CUDA C. `progress` hears of every block the tile interpreter and
    every batch of blocks the kernel interpreter finishes; `blocks_per_batch` sets how many
    blocks the kernel interpreter runs together (default: its own choice; results do not
    depend on it).
    """
    func = forward_function(module, function)
    arg_types = func.function_type.inputs.data
    if len(inputs) != len(arg_types):
        raise ValueError(f"@{function} takes {len(arg_types)} arguments, got {len(inputs)}")
    args = tuple(
        _as_argument(value, arg_type, i)
        for i, (value, arg_type) in enumerate(zip(inputs, arg_types, strict=True))
    )
    interpreter = make_interpreter(module, cuda_runner)
    set_block_progress(interpreter, progress)
    set_blocks_per_batch(interpreter, blocks_per_batch)
    results = interpreter.call_op(function, args)
    return [np.asarray(result) for result in results]
