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

Contractions (matmul, linear, bmm, convolutions through index maps) get their own passes,
run between `tile-grid-stride` and `tile-rows` (docs/scheduling.md walks one linear through
them):

| pass | applies to | decides |
|---|---|---|
| `tile-split-k` | contractions whose tiles leave SMs idle | `splits`: K slices + a combine kernel |
| `tile-block` | contractions | `bm` x `bn` output tile per block, raster `group` |
| `tile-thread` | blocked contractions | `fm` x `fn` cells per thread, `quads` order, `mma` layout |
| `tile-shared-statistics` | contractions with row statistics | `shared_statistics`: per block row |
| `tile-chunk-k` | register-tiled contractions | `bk`, the K chunk |
| `tile-stage` | chunked contractions | `stage`: operands copied through shared memory |
| `tile-prologue-product` | slab copies computing dot products | `prologue_product`: register tile |
| `tile-streaming-softmax` | attention's softmax before `@ V` | `streaming_softmax`: running stats |
| `tile-mma` | staged bf16/f16 contractions in the MMA layout | the K chunk as `mma.sync` m16n8k16 |
| `tile-ldmatrix` | 16-bit MMA fragments from a slab | `ldmatrix`: fragments loaded by `ldmatrix` |
| `tile-vectorize` | staged slabs (and elementwise) | `vector` width of the slab reads |
| `tile-pad-shared` | staged slabs | `pad_a`, `pad_b`: row padding against bank conflicts |
| `tile-multibuffer` | staged slabs | `depth` slots per slab |
| `tile-pipeline` | multibuffered slabs | `pipeline`: copies issued `depth - 1` chunks ahead |
| `tile-async-copy` | staged slabs | `async`: copies as `cp.async` with commit/wait groups |
| `tile-register-prefetch` | computed slabs | `register_prefetch`: loads a chunk ahead |
| `tile-causal-skip` | causal P.V (0 past the diagonal) | `causal_skip`: K loop ends there |

Every pass with knobs is `choices.Tunable`: it declares, per kernel, the knob values it
accepts (`legal_choices`), which is the space the tuner searches. `tile-schedule` (not in
the stage) writes given knobs on a kernel before them, so a chosen schedule replays as a
pipeline string (`set_schedule.schedule_pipeline`).

Clean-up passes then run on the scheduled kernel (last in the `tile` stage; `tile-cse` between
the last two):

| pass | applies to | decides |
|---|---|---|
| `tile-unroll` | constant-trip loop nests | `unroll` mark (`#pragma unroll`) up to `unroll` trips |
| `tile-hoist-invariant` | any `tile.for` | loop-invariant pure ops and read-only loads moved out |
| `tile-clamp-masked-loads` | loads a `key <= query` mask drops | they read `min(key, query)` |

A new scheduling pass is a module here with the same shape: a function that rewrites one
`tile.kernel` (using `nests.py` to find loops and `schedule.py` to read its knobs and
rewrite them), a `ModulePass` dataclass whose fields are the knobs' defaults, a line in
`passes/__init__.py`, and a FileCheck test under `tests/filecheck/passes/<pass-name>/`.
"""
