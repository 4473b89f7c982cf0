"""The `torch` dialect: one op per PyTorch (aten) op, on builtin `tensor<...>` values.

It is the import format of the frontend and the highest level of the pipeline. Ops keep
PyTorch's semantics (broadcasting, `torch.matmul` batching, normalization over trailing dims)
so that the importer stays a 1:1 table. Options are properties printed in the attribute
dictionary: `%s = torch.sum %x {dims = array<i64: 1>, keepdim = false} : (...) -> ...`.
Every verifier re-infers the result type from operands and properties (`infer`) and names the
op and the broken rule, so shape bugs surface at import time, not in a kernel.

The ops are grouped like the decompositions that lower them: `elementwise` (arithmetic,
activations, comparisons, where, casts, arange), `reductions` (sums, softmaxes, norms,
cumsum), `contractions` (matmul, linear, attention), `layout` (views, slices, cat and the
gathers embedding / index) and `recurrent` (one RNN/LSTM/GRU layer over a sequence);
`base` has the shared helpers and base classes.

Each of those modules declares its ops once, in its `OPS` tuple; the dialect and this
package's names (`T.AddOp`, ...) are built from those tuples, so adding an op touches only
its own module. `tests/test_op_registry.py` then checks that the frontend, the
decomposition and the interpreter all know every op listed here.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from deplodock.dialects.torch import base, contractions, elementwise, layout, recurrent, reductions
from deplodock.dialects.torch.base import *  # noqa: F403  (helpers, base classes)
from deplodock.dialects.torch.contractions import *  # noqa: F403  (its OPS, query_group)
from deplodock.dialects.torch.elementwise import *  # noqa: F403  (its OPS, CompareOp, ...)
from deplodock.dialects.torch.layout import *  # noqa: F403  (its OPS)
from deplodock.dialects.torch.recurrent import *  # noqa: F403  (its OPS)
from deplodock.dialects.torch.reductions import *  # noqa: F403  (its OPS)

#: The modules that declare ops, in the order the dialect lists them.
OP_MODULES = (elementwise, reductions, contractions, layout, recurrent)

Torch = Dialect("torch", [op for module in OP_MODULES for op in module.OPS], [])

__all__ = [
    "OP_MODULES",
    "Torch",
    *base.__all__,
    *(name for module in OP_MODULES for name in module.__all__),
]
