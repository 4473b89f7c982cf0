// RUN: deplodock-opt %s | filecheck %s
// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s -p convert-tile-to-kernel | filecheck %s --check-prefix=KERNEL

// One warp's m16n8k16 MMA at the tile level: 8 A and 4 B values of one 16-bit type, 4 fp32
// C values in, 4 fp32 D values out, per thread. The syntax round-trips, and
// convert-tile-to-kernel maps it one to one onto kernel.mma_sync.

// CHECK:      %d0, %d1, %d2, %d3 = tile.mma_sync a(%a, %a, %a, %a, %b, %b, %b, %b) b(%b, %b, %a, %a) c(%z, %z, %z, %z) : bf16
// KERNEL:     %d0, %d1, %d2, %d3 = kernel.mma_sync a(%a, %a, %a, %a, %b, %b, %b, %b) b(%b, %b, %a, %a) c(%z, %z, %z, %z) : bf16

builtin.module {
  tile.kernel @mma(%x: memref<64xbf16>, %y: memref<64xf32>) {
    tile.grid %g to 1 {
      tile.threads %t to 32 {
        %c1 = arith.constant 1 : index
        %z = arith.constant 0.000000e+00 : f32
        %a = tile.load %x[%t] : memref<64xbf16>
        %t1 = arith.addi %t, %c1 : index
        %b = tile.load %x[%t1] : memref<64xbf16>
        %d0, %d1, %d2, %d3 = tile.mma_sync a(%a, %a, %a, %a, %b, %b, %b, %b) b(%b, %b, %a, %a) c(%z, %z, %z, %z) : bf16
        tile.store %d3, %y[%t] : memref<64xf32>
      }
    }
    tile.return
  }
}
