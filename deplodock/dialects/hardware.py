"""What the CUDA target allows, in one place for the `tile`, `kernel` and `cuda` verifiers.

The limits are those of every CUDA GPU deplodock targets: a block of at most 1024 threads in
warps of 32, 48 KiB of static shared memory per block. A shared array is a memref in memory
space 3 (as in NVVM).
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
)
from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException

SHARED_MEMORY_SPACE = 3
MAX_THREADS_PER_BLOCK = 1024
WARP_SIZE = 32
MAX_STATIC_SHARED_BYTES = 48 * 1024


def is_shared(memref_type: Attribute) -> bool:
    """True for a `memref<..., 3>`: a `__shared__` array of the block."""
    if not isinstance(memref_type, MemRefType):
        return False
    space = memref_type.memory_space
    return isinstance(space, IntegerAttr) and space.value.data == SHARED_MEMORY_SPACE


def element_bytes(element_type: Attribute) -> int:
    """Size of one element in bytes (for the shared-memory budget)."""
    match element_type:
        case Float16Type() | BFloat16Type():
            return 2
        case Float32Type():
            return 4
        case Float64Type() | IndexType():
            return 8
        case IntegerType(width=width):
            return max(1, width.data // 8)
        case _:
            raise VerifyException(f"kernel: no byte size known for element type {element_type}")


def shared_bytes(memref_type: MemRefType) -> int:
    """Bytes of one static shared array."""
    count = 1
    for dim in memref_type.get_shape():
        count *= dim
    return count * element_bytes(memref_type.element_type)
