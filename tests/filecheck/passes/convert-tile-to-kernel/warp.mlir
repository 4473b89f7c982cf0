// RUN: deplodock-opt %s -p convert-tile-to-kernel | filecheck %s

// One warp: a min-combine is five shuffles and nothing else (no shared memory, no barrier).
// A grid-stride loop (start b * T + t) stores per thread, unguarded. A store whose index
// does not depend on the thread (inside a serial loop) is guarded by thread 0.

builtin.module {
  tile.kernel @row_min(%x: memref<3x100xf32>, %m: memref<3x2xf32>) {
    %c0 = arith.constant 0 : index
    %inf = arith.constant 0x7F800000 : f32
    tile.grid %b to 3 {
      tile.threads %t to 32 {
        %p = tile.for %k = %t to 100 step 32 iter_args(%a = %inf) -> (f32) {
          %v = tile.load %x[%b, %k] : memref<3x100xf32>
          %n = arith.minimumf %a, %v : f32
          tile.yield %n : f32
        }
        %min = tile.combine min %p : f32
        tile.for %i = %c0 to 2 {
          tile.store %min, %m[%b, %i] : memref<3x2xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @scale(%x: memref<1000xf32>, %y: memref<1000xf32>) {
    tile.grid %b to 4 {
      tile.threads %t to 64 {
        %c64 = arith.constant 64 : index
        %base = arith.muli %b, %c64 : index
        %start = arith.addi %base, %t : index
        tile.for %i = %start to 1000 step 256 {
          %v = tile.load %x[%i] : memref<1000xf32>
          %two = arith.constant 2.000000e+00 : f32
          %o = arith.mulf %v, %two : f32
          tile.store %o, %y[%i] : memref<1000xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: kernel.func @row_min(%x: memref<3x100xf32>, %m: memref<3x2xf32>) grid 3 block 32 {
// CHECK-NOT:     kernel.shared_alloc
// CHECK:         %p = kernel.for %k = %t to 100 step 32 iter_args(%a = %inf) -> (f32) {
// CHECK:         %[[S:.*]] = kernel.shfl_xor %p, 16 : f32
// CHECK-NEXT:    %[[W:.*]] = arith.minimumf %p, %[[S]] : f32
// CHECK-NEXT:    kernel.shfl_xor %[[W]], 8 : f32
// CHECK-NEXT:    arith.minimumf
// CHECK-NEXT:    kernel.shfl_xor %{{.*}}, 4 : f32
// CHECK-NEXT:    arith.minimumf
// CHECK-NEXT:    kernel.shfl_xor %{{.*}}, 2 : f32
// CHECK-NEXT:    arith.minimumf
// CHECK-NEXT:    %[[S1:.*]] = kernel.shfl_xor %{{.*}}, 1 : f32
// CHECK-NEXT:    %min = arith.minimumf %{{.*}}, %[[S1]] : f32
// CHECK-NEXT:    kernel.for %i = %c0{{.*}} to 2 {
// CHECK-NEXT:      kernel.if %is_thread0 {
// CHECK-NEXT:        kernel.store %min, %m[%b, %i] : memref<3x2xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NOT:     kernel.barrier
// CHECK:         kernel.return

// CHECK-LABEL: kernel.func @scale(%x: memref<1000xf32>, %y: memref<1000xf32>) grid 4 block 64 {
// CHECK-NEXT:    %t = kernel.thread_id : index
// CHECK-NEXT:    %b = kernel.block_id : index
// CHECK-NEXT:    %c64 = arith.constant 64 : index
// CHECK-NEXT:    %base = arith.muli %b, %c64 : index
// CHECK-NEXT:    %start = arith.addi %base, %t : index
// CHECK-NEXT:    kernel.for %i = %start to 1000 step 256 {
// CHECK-NEXT:      %v = kernel.load %x[%i] : memref<1000xf32>
// CHECK-NEXT:      %two = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      %o = arith.mulf %v, %two : f32
// CHECK-NEXT:      kernel.store %o, %y[%i] : memref<1000xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.return
