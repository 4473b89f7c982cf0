// RUN: deplodock-opt %s -p convert-tile-to-kernel | filecheck %s
// RUN: deplodock-opt %s -p convert-tile-to-kernel | deplodock-opt | filecheck %s --check-prefix=NOTILE

// A row reduction over 4 warps: warp shuffles, then partials through shared memory with a
// barrier on each side of the fold; the row's scale is stored by thread 0 only.

builtin.module {
  tile.kernel @rms_norm(%x: memref<1x4x256xf32>, %w: memref<256xf32>, %y: memref<1x4x256xf32>, %s: memref<4xf32>) {
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    tile.grid %b to 4 {
      tile.threads %t to 128 {
        %sum_p = tile.for %k = %t to 256 step 128 iter_args(%acc = %zero) -> (f32) {
          %v = tile.load %x[%c0, %b, %k] : memref<1x4x256xf32>
          %sq = arith.mulf %v, %v : f32
          %n = arith.addf %acc, %sq : f32
          tile.yield %n : f32
        }
        %sum = tile.combine add %sum_p : f32
        %nf = arith.constant 2.560000e+02 : f32
        %mean = arith.divf %sum, %nf : f32
        %r = math.rsqrt %mean : f32
        tile.store %r, %s[%b] : memref<4xf32>
        tile.for %j = %t to 256 step 128 {
          %xv = tile.load %x[%c0, %b, %j] : memref<1x4x256xf32>
          %wv = tile.load %w[%j] : memref<256xf32>
          %o = arith.mulf %xv, %r : f32
          %o2 = arith.mulf %o, %wv : f32
          tile.store %o2, %y[%c0, %b, %j] : memref<1x4x256xf32>
        }
      }
    }
    tile.return
  }
  func.func @forward(%x: memref<1x4x256xf32>, %w: memref<256xf32>) -> (memref<1x4x256xf32>, memref<4xf32>) {
    %y = tile.alloc : memref<1x4x256xf32>
    %s = tile.alloc : memref<4xf32>
    tile.launch @rms_norm(%x, %w, %y, %s) : (memref<1x4x256xf32>, memref<256xf32>, memref<1x4x256xf32>, memref<4xf32>) -> ()
    func.return %y, %s : memref<1x4x256xf32>, memref<4xf32>
  }
}

// CHECK-LABEL: kernel.func @rms_norm(%x: memref<1x4x256xf32>, %w: memref<256xf32>, %y: memref<1x4x256xf32>, %s: memref<4xf32>) grid 4 block 128 {
// CHECK-NEXT:    %t = kernel.thread_id : index
// CHECK-NEXT:    %b = kernel.block_id : index
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG:     %[[LANE:.*]] = arith.remsi %t, %[[C32]] : index
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[LANE0:.*]] = arith.cmpi eq, %[[LANE]], %[[C0]] : index
// CHECK-DAG:     %[[WARP:.*]] = arith.divsi %t, %[[C32]] : index
// CHECK-DAG:     %[[RED:.*]] = kernel.shared_alloc : memref<4xf32, 3 : i64>
// CHECK-DAG:     %[[T0:.*]] = arith.cmpi eq, %t, %[[C0]] : index
// CHECK:         %sum_p = kernel.for %k = %t to 256 step 128 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:      %v = kernel.load %x[%c0{{.*}}, %b, %k] : memref<1x4x256xf32>
// CHECK:           kernel.yield %n : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S16:.*]] = kernel.shfl_xor %sum_p, 16 : f32
// CHECK-NEXT:    %[[W16:.*]] = arith.addf %sum_p, %[[S16]] : f32
// CHECK-NEXT:    %[[S8:.*]] = kernel.shfl_xor %[[W16]], 8 : f32
// CHECK-NEXT:    %[[W8:.*]] = arith.addf %[[W16]], %[[S8]] : f32
// CHECK-NEXT:    %[[S4:.*]] = kernel.shfl_xor %[[W8]], 4 : f32
// CHECK-NEXT:    %[[W4:.*]] = arith.addf %[[W8]], %[[S4]] : f32
// CHECK-NEXT:    %[[S2:.*]] = kernel.shfl_xor %[[W4]], 2 : f32
// CHECK-NEXT:    %[[W2:.*]] = arith.addf %[[W4]], %[[S2]] : f32
// CHECK-NEXT:    %[[S1:.*]] = kernel.shfl_xor %[[W2]], 1 : f32
// CHECK-NEXT:    %[[W1:.*]] = arith.addf %[[W2]], %[[S1]] : f32
// CHECK-NEXT:    kernel.if %[[LANE0]] {
// CHECK-NEXT:      kernel.store %[[W1]], %[[RED]][%[[WARP]]] : memref<4xf32, 3 : i64>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    %[[INIT:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %sum = kernel.for %[[I:.*]] = %[[C0]] to 4 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32) {
// CHECK-NEXT:      %[[P:.*]] = kernel.load %[[RED]][%[[I]]] : memref<4xf32, 3 : i64>
// CHECK-NEXT:      %[[N:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:      kernel.yield %[[N]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.barrier
// CHECK:         %r = math.rsqrt %mean : f32
// CHECK-NEXT:    kernel.if %[[T0]] {
// CHECK-NEXT:      kernel.store %r, %s[%b] : memref<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.for %j = %t to 256 step 128 {
// CHECK:           kernel.store %o2, %y[%c0{{.*}}, %b, %j] : memref<1x4x256xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.return
// CHECK-NEXT:  }
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %y = kernel.alloc : memref<1x4x256xf32>
// CHECK-NEXT:    %s = kernel.alloc : memref<4xf32>
// CHECK-NEXT:    kernel.launch @rms_norm(%x, %w, %y, %s) : (memref<1x4x256xf32>, memref<256xf32>, memref<1x4x256xf32>, memref<4xf32>) -> ()

// NOTILE-NOT: tile.
