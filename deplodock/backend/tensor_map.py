"""Host-side tensor maps for TMA copies, as the CPU emulation reads them.

A kernel that copies tiles with TMA (`dd_tma_load_2d` in the device header) takes a tensor
map per tensor as a `const __grid_constant__ dd_tensor_map` parameter. On a GPU that is the
driver's opaque 128-byte `CUtensorMap`, encoded on the host by `cuTensorMapEncodeTiled`; on
the CPU it is the emulation's `TensorMap2d` (`cpu_simt.h`), whose bytes `tensor_map_2d`
builds here: the base address, the extents, the row pitch, the element size, the box and
the swizzle span. The rules checked are the driver's for a 2-D tiled map (a box of at most
256 elements a side whose row is a multiple of 16 bytes, a row pitch that is a multiple of
16 bytes) plus deplodock's one restriction: with a swizzle, the box row is exactly the
swizzle span (so shared rows are span bytes apart, the layout `tile-tma` plans for).
"""

from __future__ import annotations

import numpy as np

from deplodock.dialects.hardware import TMA_MAX_BOX, TMA_ROW_BYTES, TMA_SWIZZLE_SPANS

#: The layout of `deplodock_simt::TensorMap2d` (`cpu_simt.h`), field for field.
TENSOR_MAP_2D = np.dtype(
    [
        ("base", np.uint64),
        ("rows", np.int64),
        ("cols", np.int64),
        ("row_bytes", np.int64),
        ("element_bytes", np.int32),
        ("box_rows", np.int32),
        ("box_cols", np.int32),
        ("swizzle", np.int32),
    ]
)


class TensorMapError(ValueError):
    """A tensor map the hardware (or deplodock's layout rule) cannot use."""


def tensor_map_2d(tensor: np.ndarray, box: tuple[int, int], swizzle: int = 0) -> np.ndarray:
    """The emulation's tensor map of the 2-D `tensor` (contiguous rows, any row pitch: a
    column slice of a wider array is a narrower tensor) for boxes of `box` = (rows, cols)
    elements with a `swizzle`-byte span: a 0-d array to pass as the kernel argument (the
    emulation reads a struct parameter from the bytes behind its pointer). `tensor`'s memory
    must stay alive while kernels use the map."""
    if tensor.ndim != 2 or tensor.strides[1] != tensor.itemsize:
        raise TensorMapError("a 2-D tensor map needs a 2-D array with contiguous rows")
    if swizzle not in TMA_SWIZZLE_SPANS:
        raise TensorMapError(f"swizzle of {swizzle} bytes, expected one of {TMA_SWIZZLE_SPANS}")
    box_rows, box_cols = box
    if not (0 < box_rows <= TMA_MAX_BOX and 0 < box_cols <= TMA_MAX_BOX):
        raise TensorMapError(f"box {box_rows}x{box_cols}: each side must be 1 to {TMA_MAX_BOX}")
    row_bytes = box_cols * tensor.itemsize
    if row_bytes % TMA_ROW_BYTES:
        raise TensorMapError(
            f"a box row of {row_bytes} bytes is not a multiple of {TMA_ROW_BYTES} bytes"
        )
    if swizzle and row_bytes != swizzle:
        raise TensorMapError(
            f"a box row of {row_bytes} bytes with a {swizzle}-byte swizzle: deplodock swizzles "
            "box rows of exactly the span"
        )
    if tensor.strides[0] % TMA_ROW_BYTES:
        raise TensorMapError(
            f"row pitch of {tensor.strides[0]} bytes is not a multiple of {TMA_ROW_BYTES}"
        )
    fields = (
        tensor.ctypes.data,
        tensor.shape[0],
        tensor.shape[1],
        tensor.strides[0],
        tensor.itemsize,
        box_rows,
        box_cols,
        swizzle,
    )
    return np.array(fields, dtype=TENSOR_MAP_2D)
