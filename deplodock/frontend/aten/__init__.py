"""The aten -> torch-dialect table of the PyTorch frontend.

Each handler turns one FX node of an exported program into torch-dialect ops. Arguments
arrive normalized by the op's schema (`torch.fx.operator_schemas.normalize_function`), so a
handler reads `a["input"]`, `a["dim"]`, ... with PyTorch's defaults filled in. Python scalars
become rank-0 `torch.constant`s of the tensor's element type; negative dims and out-of-range
slice bounds are normalized here, because the dialect only admits canonical forms.

Mixed dtypes follow PyTorch's promotion (`torch.result_type`): the operands of a binary op
are cast (`torch.cast`) to the dtype the op computes in, so every torch op sees one element
type per operand group. Ops PyTorch spells with many overloads (`full`, `ones_like`, ...,
`masked_fill`, `diff`) map onto a few dialect ops here.

The table is a package: `core` (dtypes, `Emitter`, the `HANDLERS` registry), `elementwise`,
`structured` and `composite` (the handlers, registered on import; `composite` is a package of
the norms, losses, pooling, convolution and einsum written with other torch ops). Each
registration names the torch ops its handler builds
(`@handles(aten.erf.default, emits=T.ErfOp)`); `handled_op_types()` is their union, which
`tests/test_op_registry.py` compares with the dialect.
"""

from __future__ import annotations

from deplodock.frontend.aten import arithmetic, composite, elementwise, structured
from deplodock.frontend.aten.core import (
    DTYPES,
    GLUE_OPS,
    HANDLERS,
    AtenImportError,
    Emitter,
    Handler,
    Registration,
    handled_op_types,
    handles,
    target_name,
    tensor_type,
)

__all__ = [
    "DTYPES",
    "GLUE_OPS",
    "HANDLERS",
    "AtenImportError",
    "Emitter",
    "Handler",
    "Registration",
    "arithmetic",
    "composite",
    "elementwise",
    "handled_op_types",
    "handles",
    "structured",
    "target_name",
    "tensor_type",
]
