// RUN: deplodock-opt %s | filecheck %s
// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s -p convert-tile-to-kernel | filecheck %s --check-prefix=KERNEL

// The tf32 forms at the tile level: `tile.split_tf32` writes an fp32 value as two tf32
// values, and a tile.mma_sync on f32 operands (printed `: tf32`) is the m16n8k8, 4 A and 2 B
// values per thread; `correction` marks an MMA that adds a rounding correction of tf32x3.
// The syntax round-trips, and convert-tile-to-kernel maps both one to one, the attribute kept.

// CHECK:      %hi, %lo = tile.split_tf32 %a
// CHECK-NEXT: %e0, %e1, %e2, %e3 = tile.mma_sync a(%lo, %lo, %lo, %lo) b(%hi, %hi) c(%z, %z, %z, %z) {correction} : tf32
// CHECK-NEXT: %d0, %d1, %d2, %d3 = tile.mma_sync a(%hi, %hi, %hi, %hi) b(%hi, %hi) c(%e0, %e1, %e2, %e3) : tf32
// KERNEL:      %hi, %lo = kernel.split_tf32 %a
// KERNEL-NEXT: %e0, %e1, %e2, %e3 = kernel.mma_sync a(%lo, %lo, %lo, %lo) b(%hi, %hi) c(%z, %z, %z, %z) {correction} : tf32
// KERNEL-NEXT: %d0, %d1, %d2, %d3 = kernel.mma_sync a(%hi, %hi, %hi, %hi) b(%hi, %hi) c(%e0, %e1, %e2, %e3) : tf32

builtin.module {
  tile.kernel @mma(%x: memref<64xf32>, %y: memref<64xf32>) {
    tile.grid %g to 1 {
      tile.threads %t to 32 {
        %z = arith.constant 0.000000e+00 : f32
        %a = tile.load %x[%t] : memref<64xf32>
        %hi, %lo = tile.split_tf32 %a
        %e0, %e1, %e2, %e3 = tile.mma_sync a(%lo, %lo, %lo, %lo) b(%hi, %hi) c(%z, %z, %z, %z) {correction} : tf32
        %d0, %d1, %d2, %d3 = tile.mma_sync a(%hi, %hi, %hi, %hi) b(%hi, %hi) c(%e0, %e1, %e2, %e3) : tf32
        tile.store %d3, %y[%t] : memref<64xf32>
      }
    }
    tile.return
  }
}
