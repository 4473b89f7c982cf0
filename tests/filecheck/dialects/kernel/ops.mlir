// RUN: deplodock-opt %s | deplodock-opt | filecheck %s

builtin.module {
  kernel.func @rms_norm(%x: memref<4x256xf32>, %w: memref<256xf32>, %y: memref<4x256xf32>) grid 4 block 64 {
    %t = kernel.thread_id : index
    %b = kernel.block_id : index
    %zero = arith.constant 0.000000e+00 : f32
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %red = kernel.shared_alloc : memref<2xf32, 3>
    %s = kernel.for %k = %t to 256 step 64 iter_args(%acc = %zero) -> (f32) {
      %v = kernel.load %x[%b, %k] : memref<4x256xf32>
      %sq = arith.mulf %v, %v : f32
      %n = arith.addf %acc, %sq : f32
      kernel.yield %n : f32
    }
    %s16 = kernel.shfl_xor %s, 16 : f32
    %lane = arith.remsi %t, %c32 : index
    %warp = arith.floordivsi %t, %c32 : index
    %is_lane0 = arith.cmpi eq, %lane, %c0 : index
    kernel.if %is_lane0 {
      kernel.store %s16, %red[%warp] : memref<2xf32, 3>
    }
    kernel.barrier
    %tot = kernel.for %i = %c0 to 2 iter_args(%a = %zero) -> (f32) {
      %p = kernel.load %red[%i] : memref<2xf32, 3>
      %q = arith.addf %a, %p : f32
      kernel.yield %q : f32
    }
    kernel.barrier
    kernel.for %j = %t to 256 step 64 {
      %v = kernel.load %x[%b, %j] : memref<4x256xf32>
      %g = kernel.load %w[%j] : memref<256xf32>
      %o = arith.mulf %v, %tot : f32
      %o2 = arith.mulf %o, %g : f32
      kernel.store %o2, %y[%b, %j] : memref<4x256xf32>
    }
    kernel.return
  }
  func.func @forward(%x: memref<4x256xf32>, %w: memref<256xf32>) -> memref<4x256xf32> {
    %y = kernel.alloc : memref<4x256xf32>
    kernel.launch @rms_norm(%x, %w, %y) : (memref<4x256xf32>, memref<256xf32>, memref<4x256xf32>) -> ()
    func.return %y : memref<4x256xf32>
  }
}

// CHECK-LABEL: kernel.func @rms_norm(%x: memref<4x256xf32>, %w: memref<256xf32>, %y: memref<4x256xf32>) grid 4 block 64 {
// CHECK-NEXT:    %t = kernel.thread_id : index
// CHECK-NEXT:    %b = kernel.block_id : index
// CHECK:         %red = kernel.shared_alloc : memref<2xf32, 3 : i64>
// CHECK-NEXT:    %s = kernel.for %k = %t to 256 step 64 iter_args(%acc = %zero) -> (f32) {
// CHECK-NEXT:      %v = kernel.load %x[%b, %k] : memref<4x256xf32>
// CHECK:           kernel.yield %n : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %s16 = kernel.shfl_xor %s, 16 : f32
// CHECK:         kernel.if %is_lane0 {
// CHECK-NEXT:      kernel.store %s16, %red[%warp] : memref<2xf32, 3 : i64>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    %tot = kernel.for %i = %c0 to 2 iter_args(%a = %zero) -> (f32) {
// CHECK-NEXT:      %p = kernel.load %red[%i] : memref<2xf32, 3 : i64>
// CHECK:         kernel.barrier
// CHECK-NEXT:    kernel.for %j = %t to 256 step 64 {
// CHECK-NOT:       kernel.yield
// CHECK:           kernel.store %o2, %y[%b, %j] : memref<4x256xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.return
// CHECK-NEXT:  }
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %y = kernel.alloc : memref<4x256xf32>
// CHECK-NEXT:    kernel.launch @rms_norm(%x, %w, %y) : (memref<4x256xf32>, memref<256xf32>, memref<4x256xf32>) -> ()
// CHECK-NEXT:    func.return %y : memref<4x256xf32>
