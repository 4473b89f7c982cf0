"""deplodock's dialects, passes and `cuda` target as an xDSL `Universe`, so that the stock
`xdsl-opt` loads them (entry point group `xdsl.universe`, declared in pyproject.toml):

    xdsl-opt -p convert-torch-to-tensor rmsnorm.mlir
    xdsl-opt kernel.mlir -t cuda

xDSL merges every installed universe and refuses two definitions of one name. deplodock's
`tensor` dialect replaces xDSL's own `tensor` inside deplodock's tools but cannot replace it
in `xdsl-opt`, so it is left out here: `xdsl-opt` prints our tensor ops (a pass's output)
but parses tensor-level files with xDSL's dialect; `deplodock-opt` reads them.
"""

from __future__ import annotations

from xdsl.dialects import get_all_dialects as upstream_dialects
from xdsl.universe import Universe

from deplodock.dialects import DEPLODOCK_DIALECTS, dialect_loader
from deplodock.passes import get_all_passes


def _cuda_target() -> type:
    """The `cuda` target (whole translation unit), imported only when asked for."""
    from deplodock.backend.cuda_source import CudaTarget

    return CudaTarget


#: The dialect names xDSL already defines (and keeps, in `xdsl-opt`).
SHADOWED_DIALECTS = frozenset(DEPLODOCK_DIALECTS) & frozenset(upstream_dialects())

DEPLODOCK_UNIVERSE = Universe(
    all_dialects={
        name: dialect_loader(name) for name in DEPLODOCK_DIALECTS if name not in SHADOWED_DIALECTS
    },
    all_passes=get_all_passes(),
    all_targets={"cuda": _cuda_target},
)
