"""The scheduling passes: tile -> tile rewrites that each make one decision.

`convert-loop-to-tile` leaves every kernel unscheduled (one block of one warp, every thread
running every loop). The baseline schedule is then small passes, run in this order by the
`tile` stage; each maps some serial loops of a kernel onto blocks or threads (or, for
`tile-vectorize`, widens the accesses of a grid-stride loop) and records its knobs in the
kernel's `schedule` attribute (`schedule.py`):

| pass | applies to | decides |
|---|---|---|
| `tile-grid-stride` | elementwise kernels | every nest strided over all blocks x threads |
| `tile-vectorize` | contiguous grid-stride kernels | elements per thread and access |
| `tile-rows` | reducing kernels with short rows | `W` threads per row, `R` rows per block |
| `tile-rows-to-blocks` | reducing kernels | one block per row of the outer free nest |
| `tile-loops-to-threads` | a block's serial loops | block size; free nests strided over threads |
| `tile-cooperative-reduce` | a block's serial loops | reductions split over threads + combine |
| `tile-online-softmax` | softmax's max + sum sweeps | one sweep with a running max (long rows) |
| `tile-row-on-chip` | kernels sweeping a row twice | row kept in registers or shared memory |

Two clean-up passes then run on the scheduled kernel (last in the `tile` stage):

| pass | applies to | decides |
|---|---|---|
| `tile-unroll` | constant-trip loop nests | `unroll` mark (`#pragma unroll`) up to `unroll` trips |
| `tile-hoist-invariant` | any `tile.for` | loop-invariant pure ops and read-only loads moved out |

A new scheduling pass is a module here with the same shape: a function that rewrites one
`tile.kernel` (using `nests.py` to find loops and `schedule.py` to read its knobs and
rewrite them), a `ModulePass` dataclass whose fields are the knobs' defaults, a line in
`passes/__init__.py`, and a FileCheck test under `tests/filecheck/passes/<pass-name>/`.
"""
