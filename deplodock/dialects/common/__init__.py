"""Op base classes shared by the buffer-level dialects (`loop`, `tile`, `kernel`).

The loop, tile and kernel dialects have near-identical kernels, loops, loads, stores, allocs
and launches. Their syntax and verifiers live here once; a dialect mirrors them with a
one-line subclass that sets `name` (and, for loops and kernels, the terminator trait):

```python
@irdl_op_definition
class YieldOp(YieldOpBase):
    name = "tile.yield"

@irdl_op_definition
class ForOp(DynamicForOpBase):          # `tile.for %i = %t to 2048 step 256 ...`
    name = "tile.for"
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(YieldOp),))

@irdl_op_definition
class KernelOp(KernelOpBase):           # `tile.kernel @k(%a: memref<..>) { ... }`
    name = "tile.kernel"
    traits = lazy_traits_def(lambda: (SingleBlockImplicitTerminator(ReturnOp),))
```

Modules (syntax in docs/ir.md sections 3-5): `loops` (for, yield, if), `memory` (load, store,
atomic_add, alloc), `kernels` (kernel, return, launch) and `syntax` (parse/print helpers that the
`tensor` dialect uses too).
"""

from __future__ import annotations

from deplodock.dialects.common.kernels import (
    KernelOpBase,
    LaunchOpBase,
    ReturnOpBase,
)
from deplodock.dialects.common.loops import (
    DynamicForOpBase,
    ForOpBase,
    IfOpBase,
    StaticForOpBase,
    YieldOpBase,
)
from deplodock.dialects.common.memory import (
    AllocOpBase,
    AtomicAddOpBase,
    LoadOpBase,
    StoreOpBase,
)
from deplodock.dialects.common.syntax import format_types

__all__ = [
    "AllocOpBase",
    "AtomicAddOpBase",
    "DynamicForOpBase",
    "ForOpBase",
    "IfOpBase",
    "KernelOpBase",
    "LaunchOpBase",
    "LoadOpBase",
    "ReturnOpBase",
    "StaticForOpBase",
    "StoreOpBase",
    "YieldOpBase",
    "format_types",
]
