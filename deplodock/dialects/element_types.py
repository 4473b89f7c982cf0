"""Every element type deplodock computes with, and what it is in numpy, torch and CUDA C.

One table row per type, so the interpreters (numpy), the frontend and the GPU runtime (torch),
the CUDA printer (C) and the memory counts (bytes) agree on one fact instead of four. bf16
has no numpy dtype: the interpreters carry it as float32 rounded to bf16 after every op, the
GPU stores it as `__nv_bfloat16` (16 bits) and torch as `torch.bfloat16`.

```python
>>> from xdsl.dialects.builtin import bf16
>>> element_info(bf16).c_type, element_info(bf16).bytes, numpy_dtype(bf16)
('__nv_bfloat16', 2, dtype('float32'))
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    IndexType,
    IntegerType,
    MemRefType,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute


class UnsupportedElementType(TypeError):
    """The element type has no row in the table (a type deplodock cannot compute with)."""


@dataclass(frozen=True)
class ElementTypeInfo:
    """What one element type is everywhere deplodock meets it."""

    #: The IR spelling: `f32`, `bf16`, `index`, `i1`...
    name: str
    #: The numpy dtype the interpreters carry values in (bf16 rides in float32).
    numpy: str
    #: The `torch.<name>` dtype of a tensor holding these elements on the host or the GPU.
    torch: str
    #: The C type of one buffer element in the emitted CUDA (`index` buffers hold int64).
    c_type: str
    #: Bytes of one element in a buffer (what memory traffic and shared memory count).
    bytes: int
    #: The CUDA header that declares the C type, if it is not built in.
    include: str | None = None


def _integer(width: int, c_type: str) -> ElementTypeInfo:
    numpy = "bool" if width == 1 else f"int{width}"
    return ElementTypeInfo(f"i{width}", numpy, numpy, c_type, max(1, width // 8))


#: The table. Each row's key is the builtin type object itself (types are hashable values).
ELEMENT_TYPES: dict[Attribute, ElementTypeInfo] = {
    f32: ElementTypeInfo("f32", "float32", "float32", "float", 4),
    f16: ElementTypeInfo("f16", "float16", "float16", "__half", 2, "cuda_fp16.h"),
    bf16: ElementTypeInfo("bf16", "float32", "bfloat16", "__nv_bfloat16", 2, "cuda_bf16.h"),
    f64: ElementTypeInfo("f64", "float64", "float64", "double", 8),
    IndexType(): ElementTypeInfo("index", "int64", "int64", "long long", 8),
    i1: _integer(1, "bool"),
    i8: _integer(8, "signed char"),
    i16: _integer(16, "short"),
    i32: _integer(32, "int"),
    i64: _integer(64, "long long"),
}


def element_info(element_type: Attribute) -> ElementTypeInfo:
    """The table row of `element_type`; an unknown type is a one-line error naming it."""
    info = ELEMENT_TYPES.get(element_type)
    if info is None:
        if isinstance(element_type, IntegerType):
            raise UnsupportedElementType(
                f"no {element_type.width.data}-bit integer element type (i1, i8, i16, i32 "
                "and i64 are supported)"
            )
        raise UnsupportedElementType(f"unsupported element type {element_type}")
    return info


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The numpy dtype the interpreters hold values of `element_type` in."""
    return np.dtype(element_info(element_type).numpy)


def torch_dtype(element_type: Attribute) -> Any:
    """The torch dtype of a tensor of `element_type` (torch is imported only when asked)."""
    import torch

    return getattr(torch, element_info(element_type).torch)


def byte_size(element_type: Attribute) -> int:
    """Bytes of one element in a buffer."""
    return element_info(element_type).bytes


def buffer_bytes(shaped_type: MemRefType | TensorType) -> int:
    """Bytes of a static buffer: what the host `cudaMalloc`s and copies, what a shared array
    takes of the block's budget, what a kernel moves when it reads a buffer once."""
    return math.prod(shaped_type.get_shape()) * byte_size(shaped_type.get_element_type())


def is_narrow_float(element_type: Attribute) -> bool:
    """f16 and bf16: arithmetic on them computes in f32 and rounds the result back."""
    return isinstance(element_type, Float16Type | BFloat16Type)


def round_to_type(value: object, element_type: Attribute) -> object:
    """A computed value as `element_type` holds it, in its numpy dtype (bf16: float32
    rounded to bf16), so every level rounds the way the GPU stores."""
    dtype = numpy_dtype(element_type)
    array = np.asarray(value)
    if array.dtype != dtype:
        array = array.astype(dtype)
    if isinstance(element_type, BFloat16Type):  # no numpy bf16: round through torch
        import torch

        array = torch.from_numpy(np.ascontiguousarray(array)).to(torch.bfloat16).float().numpy()
    return array if array.ndim else array[()]


def accumulator_type(element_type: Attribute) -> Attribute:
    """The type a reduction of `element_type` accumulates in: f32 for f16/bf16 (as kernels
    and PyTorch do), the type itself otherwise."""
    return f32 if is_narrow_float(element_type) else element_type
