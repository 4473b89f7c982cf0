// RUN: deplodock-opt %s -p kernel-drop-barriers | filecheck %s

// A kernel.barrier stays only where an access before it (since the previous barrier) and
// an access after it (until the next barrier) may touch the same buffer, one of them a
// store; loop bodies wrap around, so a barrier in a loop also sees the other iterations.
//
// @publish: lane-0 stores to %red, then every thread reads %red: the barrier between them
//   stays (read after write). The second barrier has only global accesses of other
//   buffers after it: it goes, and so does the third, right after it.
// @reuse: the fold reads %red, then the next publish overwrites it: the barrier between
//   them stays (write after read), the kernel's last barrier goes.
// @reads: only reads of %s on both sides of the second barrier: it goes.
// @loop: a barrier at the top of a loop body orders the previous iteration's reads of %s
//   before this iteration's stores (the end of the body wraps to its start): it stays.
// @globals: a store to the global %y before, a load of %y after: the barrier orders global
//   memory within the block, so it stays.
// @mma: a kernel.mma_sync exchanges registers, not memory (like kernel.shfl_xor): the
//   barrier before it and a global store goes.

builtin.module {
  kernel.func @publish(%x: memref<64xf32>, %y: memref<64xf32>) grid 1 block 64 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %warp = arith.divsi %t, %c32 : index
    %lane = arith.remsi %t, %c32 : index
    %is_lane0 = arith.cmpi eq, %lane, %c0 : index
    %red = kernel.shared_alloc : memref<2xf32, 3>
    %v = kernel.load %x[%t] : memref<64xf32>
    kernel.if %is_lane0 {
      kernel.store %v, %red[%warp] : memref<2xf32, 3>
    }
    kernel.barrier
    %p = kernel.load %red[%c0] : memref<2xf32, 3>
    kernel.barrier
    kernel.barrier
    kernel.store %p, %y[%t] : memref<64xf32>
    kernel.return
  }
  kernel.func @reuse(%x: memref<64xf32>, %y: memref<64xf32>) grid 1 block 64 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %is_t0 = arith.cmpi eq, %t, %c0 : index
    %red = kernel.shared_alloc : memref<1xf32, 3>
    %v = kernel.load %x[%t] : memref<64xf32>
    kernel.if %is_t0 {
      kernel.store %v, %red[%c0] : memref<1xf32, 3>
    }
    kernel.barrier
    %a = kernel.load %red[%c0] : memref<1xf32, 3>
    kernel.barrier
    kernel.if %is_t0 {
      kernel.store %a, %red[%c0] : memref<1xf32, 3>
    }
    kernel.barrier
    %b = kernel.load %red[%c0] : memref<1xf32, 3>
    kernel.barrier
    kernel.store %b, %y[%t] : memref<64xf32>
    kernel.return
  }
  kernel.func @reads(%y: memref<32xf32>) grid 1 block 32 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %s = kernel.shared_alloc : memref<32xf32, 3>
    %one = arith.constant 1.000000e+00 : f32
    kernel.store %one, %s[%t] : memref<32xf32, 3>
    kernel.barrier
    %a = kernel.load %s[%c0] : memref<32xf32, 3>
    kernel.barrier
    %b = kernel.load %s[%t] : memref<32xf32, 3>
    %sum = arith.addf %a, %b : f32
    kernel.store %sum, %y[%t] : memref<32xf32>
    kernel.return
  }
  kernel.func @loop(%x: memref<4x32xf32>, %y: memref<4x32xf32>) grid 1 block 32 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %s = kernel.shared_alloc : memref<32xf32, 3>
    kernel.for %i = %c0 to 4 {
      kernel.barrier
      %v = kernel.load %x[%i, %t] : memref<4x32xf32>
      kernel.store %v, %s[%t] : memref<32xf32, 3>
      kernel.barrier
      %w = kernel.load %s[%c0] : memref<32xf32, 3>
      kernel.store %w, %y[%i, %t] : memref<4x32xf32>
    }
    kernel.return
  }
  kernel.func @globals(%y: memref<32xf32>, %z: memref<32xf32>) grid 1 block 32 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %one = arith.constant 1.000000e+00 : f32
    kernel.store %one, %y[%t] : memref<32xf32>
    kernel.barrier
    %v = kernel.load %y[%c0] : memref<32xf32>
    kernel.store %v, %z[%t] : memref<32xf32>
    kernel.return
  }
  kernel.func @mma(%x: memref<32xbf16>, %y: memref<32xf32>) grid 1 block 32 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %zero = arith.constant 0.000000e+00 : f32
    %s = kernel.shared_alloc : memref<32xbf16, 3>
    %v = kernel.load %x[%t] : memref<32xbf16>
    kernel.store %v, %s[%t] : memref<32xbf16, 3>
    kernel.barrier
    %a = kernel.load %s[%c0] : memref<32xbf16, 3>
    kernel.barrier
    %d0, %d1, %d2, %d3 = kernel.mma_sync a(%a, %a, %a, %a, %a, %a, %a, %a) b(%a, %a, %a, %a) c(%zero, %zero, %zero, %zero) : bf16
    kernel.store %d0, %y[%t] : memref<32xf32>
    kernel.return
  }
}

// CHECK-LABEL: kernel.func @publish(
// CHECK:           kernel.store %v, %red[%warp] : memref<2xf32, 3 : i64>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    %p = kernel.load %red[%c0] : memref<2xf32, 3 : i64>
// CHECK-NEXT:    kernel.store %p, %y[%t] : memref<64xf32>

// CHECK-LABEL: kernel.func @reuse(
// CHECK:           kernel.store %v, %red[%c0] : memref<1xf32, 3 : i64>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    %a = kernel.load %red[%c0] : memref<1xf32, 3 : i64>
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    kernel.if %is_t0 {
// CHECK-NEXT:      kernel.store %a, %red[%c0] : memref<1xf32, 3 : i64>
// CHECK-NEXT:    }
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    %b = kernel.load %red[%c0] : memref<1xf32, 3 : i64>
// CHECK-NEXT:    kernel.store %b, %y[%t] : memref<64xf32>

// CHECK-LABEL: kernel.func @reads(
// CHECK:         kernel.store %one, %s[%t] : memref<32xf32, 3 : i64>
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    %a = kernel.load %s[%c0] : memref<32xf32, 3 : i64>
// CHECK-NEXT:    %b = kernel.load %s[%t] : memref<32xf32, 3 : i64>

// CHECK-LABEL: kernel.func @loop(
// CHECK:         kernel.for %i = %c0 to 4 {
// CHECK-NEXT:      kernel.barrier
// CHECK-NEXT:      %v = kernel.load %x[%i, %t] : memref<4x32xf32>
// CHECK-NEXT:      kernel.store %v, %s[%t] : memref<32xf32, 3 : i64>
// CHECK-NEXT:      kernel.barrier
// CHECK-NEXT:      %w = kernel.load %s[%c0] : memref<32xf32, 3 : i64>

// CHECK-LABEL: kernel.func @globals(
// CHECK:         kernel.store %one, %y[%t] : memref<32xf32>
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    %v = kernel.load %y[%c0] : memref<32xf32>

// CHECK-LABEL: kernel.func @mma(
// CHECK:         kernel.store %v, %s[%t] : memref<32xbf16, 3 : i64>
// CHECK-NEXT:    kernel.barrier
// CHECK-NEXT:    %a = kernel.load %s[%c0] : memref<32xbf16, 3 : i64>
// CHECK-NEXT:    %d0, %d1, %d2, %d3 = kernel.mma_sync a(%a, %a, %a, %a, %a, %a, %a, %a) b(%a, %a, %a, %a) c(%zero, %zero, %zero, %zero) : bf16
