// RUN: deplodock-opt %s -p tile-cse | filecheck %s

// A row kept in registers and walked twice, as tile-row-on-chip and tile-unroll leave a
// softmax: exp(x - max) is computed for the sum and again for the output. tile-cse keeps the
// first and reuses it. The reload of %x after the shared store and the barrier stays: a
// barrier counts as a write, so a load on its other side may see other data. The reload of
// %x before any write is merged with the first load.

// CHECK-LABEL: tile.kernel @softmax_like
// CHECK:         %[[X:.*]] = tile.load %x[%b, %t]
// CHECK-NOT:     tile.load %x[%b, %t]
// CHECK:         %[[D:.*]] = arith.subf %[[X]], %[[M:.*]] : f32
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NOT:     math.exp
// CHECK:         tile.barrier
// CHECK-NEXT:    %[[X2:.*]] = tile.load %x[%b, %t]
// CHECK:         arith.mulf %[[E]], %{{.*}} : f32
// CHECK-NOT:     math.exp
// CHECK:         tile.return

builtin.module {
  tile.kernel @softmax_like(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
    tile.grid %b to 4 {
      tile.threads %t to 32 {
        %red = tile.shared_alloc : memref<1xf32, 3 : i64>
        %c0 = arith.constant 0 : index
        %v = tile.load %x[%b, %t] : memref<4x32xf32>
        %m = tile.combine max %v : f32
        %d = arith.subf %v, %m : f32
        %e = math.exp %d : f32
        %s = tile.combine add %e : f32
        %inv = arith.divf %m, %s : f32
        %again = tile.load %x[%b, %t] : memref<4x32xf32>
        tile.store %inv, %red[%c0] : memref<1xf32, 3 : i64>
        tile.barrier
        %after = tile.load %x[%b, %t] : memref<4x32xf32>
        %d2 = arith.subf %again, %m : f32
        %e2 = math.exp %d2 : f32
        %o = arith.mulf %e2, %inv : f32
        %o2 = arith.addf %o, %after : f32
        tile.store %o2, %y[%b, %t] : memref<4x32xf32>
      }
    }
    tile.return
  }
}
