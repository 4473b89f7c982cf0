"""Every deplodock pass, by its pipeline name.

Passes are imported lazily (xDSL's `get_all_passes` convention) so a tool pays only for the
passes a pipeline names.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from importlib import import_module

from xdsl.passes import ModulePass

#: pass name -> (module, class). One pass per module.
DEPLODOCK_PASSES: dict[str, tuple[str, str]] = {
    "convert-torch-to-tensor": ("convert_torch_to_tensor", "ConvertTorchToTensorPass"),
    "convert-tensor-to-loop": ("convert_tensor_to_loop", "ConvertTensorToLoopPass"),
    "loop-fusion": ("loop_fusion", "LoopFusionPass"),
    "loop-sibling-fusion": ("loop_sibling_fusion", "LoopSiblingFusionPass"),
    "dedupe-kernels": ("dedupe_kernels", "DedupeKernelsPass"),
    "convert-loop-to-tile": ("convert_loop_to_tile", "ConvertLoopToTilePass"),
    "tile-schedule": ("tile.set_schedule", "TileSchedulePass"),
    "tile-split-k": ("tile.split_k", "TileSplitKPass"),
    "tile-block": ("tile.block", "TileBlockPass"),
    "tile-thread": ("tile.thread", "TileThreadPass"),
    "tile-shared-statistics": ("tile.shared_statistics", "TileSharedStatisticsPass"),
    "tile-chunk-k": ("tile.chunk_k", "TileChunkKPass"),
    "tile-stage": ("tile.stage", "TileStagePass"),
    "tile-pad-shared": ("tile.pad_shared", "TilePadSharedPass"),
    "tile-multibuffer": ("tile.multibuffer", "TileMultibufferPass"),
    "tile-pipeline": ("tile.pipeline", "TilePipelinePass"),
    "tile-async-copy": ("tile.async_copy", "TileAsyncCopyPass"),
    "tile-register-prefetch": ("tile.register_prefetch", "TileRegisterPrefetchPass"),
    "tile-grid-stride": ("tile.grid_stride", "TileGridStridePass"),
    "tile-vectorize": ("tile.vectorize", "TileVectorizePass"),
    "tile-mma": ("tile.mma", "TileMmaPass"),
    "tile-ldmatrix": ("tile.ldmatrix", "TileLdmatrixPass"),
    "tile-prologue-product": ("tile.prologue_product", "TilePrologueProductPass"),
    "tile-streaming-softmax": ("tile.streaming_softmax", "TileStreamingSoftmaxPass"),
    "tile-rows": ("tile.rows", "TileRowsPass"),
    "tile-rows-to-blocks": ("tile.rows_to_blocks", "TileRowsToBlocksPass"),
    "tile-online-softmax": ("tile.online_softmax", "TileOnlineSoftmaxPass"),
    "tile-row-on-chip": ("tile.row_on_chip", "TileRowOnChipPass"),
    "tile-loops-to-threads": ("tile.loops_to_threads", "TileLoopsToThreadsPass"),
    "tile-cooperative-reduce": ("tile.cooperative_reduce", "TileCooperativeReducePass"),
    "tile-unroll": ("tile.unroll", "TileUnrollPass"),
    "tile-block-rows": ("tile.block_rows", "TileBlockRowsPass"),
    "tile-vectorize-rows": ("tile.vectorize_rows", "TileVectorizeRowsPass"),
    "tile-hoist-invariant": ("tile.hoist_invariant", "TileHoistInvariantPass"),
    "tile-causal-skip": ("tile.causal_skip", "TileCausalSkipPass"),
    "tile-clamp-masked-loads": ("tile.clamp_masked_loads", "TileClampMaskedLoadsPass"),
    "tile-cse": ("tile.cse", "TileCsePass"),
    "convert-tile-to-kernel": ("convert_tile_to_kernel", "ConvertTileToKernelPass"),
    "kernel-drop-barriers": ("kernel_drop_barriers", "KernelDropBarriersPass"),
    "convert-kernel-to-cuda": ("convert_kernel_to_cuda", "ConvertKernelToCudaPass"),
    "lower-to-torch": ("pipelines", "LowerToTorchPass"),
    "lower-to-tensor": ("pipelines", "LowerToTensorPass"),
    "lower-to-loop": ("pipelines", "LowerToLoopPass"),
    "lower-to-tile": ("pipelines", "LowerToTilePass"),
    "lower-to-kernel": ("pipelines", "LowerToKernelPass"),
    "lower-to-cuda": ("pipelines", "LowerToCudaPass"),
}


def pass_loader(name: str) -> Callable[[], type[ModulePass]]:
    module_name, class_name = DEPLODOCK_PASSES[name]
    return lambda: getattr(import_module(f"deplodock.passes.{module_name}"), class_name)


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {name: pass_loader(name) for name in DEPLODOCK_PASSES}


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'tile-block'?)` for the closest of `known` to a mistyped `name` (a
    pass, a pass option, a knob), or '' when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def unknown_pass(name: str, known: Iterable[str]) -> str:
    """`unknown pass 'tile-blok' (did you mean 'tile-block'?)`: what a tool says of a pass
    name it has not got."""
    return f"unknown pass '{name}'{did_you_mean(name, known)}"
