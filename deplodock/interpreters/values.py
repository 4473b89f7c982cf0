"""How IR types map to the numpy values the interpreters compute with.

Every level's interpreter agrees on one representation: a tensor or a buffer is a numpy array
of the element type's dtype (`dialects/element_types.py` says which), an `index` is a Python
int or an int64 array, an `i1` is a bool. bf16 has no numpy dtype; it is carried as float32
rounded to bf16 after every op.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import MemRefType, TensorType

from deplodock.dialects.element_types import numpy_dtype


def empty_buffer(shaped_type: MemRefType | TensorType) -> np.ndarray:
    """A fresh buffer for `shaped_type`, poisoned so that an unwritten element shows.

    Floats start as NaN and integers as their minimum, so a kernel that forgets to write an
    element fails the comparison with PyTorch instead of passing on leftover zeros.
    """
    dtype = numpy_dtype(shaped_type.element_type)
    shape = tuple(shaped_type.get_shape())
    if np.issubdtype(dtype, np.floating):
        return np.full(shape, np.nan, dtype=dtype)
    if dtype == np.bool_:
        return np.zeros(shape, dtype=dtype)
    return np.full(shape, np.iinfo(dtype).min, dtype=dtype)
