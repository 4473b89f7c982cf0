// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

kernel.func @span_mismatch(%a: memref<256x64xbf16>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %s = kernel.shared_alloc : memref<16x64xbf16, 3 : i64>
  %bar = kernel.shared_alloc : memref<1xi64, 3 : i64>
  kernel.tma_load %s[%c0, %c0], %a[%c0, %c0], %bar[%c0] swizzle 64 : memref<16x64xbf16, 3 : i64>, memref<256x64xbf16>, memref<1xi64, 3 : i64>
  kernel.return
}
// CHECK: kernel.tma_load: a box row of 128 bytes must be a multiple of 16 bytes, and exactly the span under a 64-byte swizzle

// -----

kernel.func @bad_span(%a: memref<256x64xbf16>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %s = kernel.shared_alloc : memref<16x64xbf16, 3 : i64>
  %bar = kernel.shared_alloc : memref<1xi64, 3 : i64>
  kernel.tma_load %s[%c0, %c0], %a[%c0, %c0], %bar[%c0] swizzle 16 : memref<16x64xbf16, 3 : i64>, memref<256x64xbf16>, memref<1xi64, 3 : i64>
  kernel.return
}
// CHECK: kernel.tma_load: swizzle of 16 bytes, expected one of 0, 32, 64, 128

// -----

kernel.func @into_global(%a: memref<256x64xbf16>, %b: memref<16x64xbf16>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %bar = kernel.shared_alloc : memref<1xi64, 3 : i64>
  kernel.tma_load %b[%c0, %c0], %a[%c0, %c0], %bar[%c0] swizzle 128 : memref<16x64xbf16>, memref<256x64xbf16>, memref<1xi64, 3 : i64>
  kernel.return
}
// CHECK: kernel.tma_load: the destination is a shared box, got memref<16x64xbf16>

// -----

kernel.func @box_offset(%a: memref<256x64xbf16>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %s = kernel.shared_alloc : memref<32x64xbf16, 3 : i64>
  %bar = kernel.shared_alloc : memref<1xi64, 3 : i64>
  kernel.tma_load %s[%c8, %c0], %a[%c0, %c0], %bar[%c0] swizzle 128 : memref<32x64xbf16, 3 : i64>, memref<256x64xbf16>, memref<1xi64, 3 : i64>
  kernel.return
}
// CHECK: kernel.tma_load: the box fills the destination's last two dimensions: their indices must be the constant 0

// -----

kernel.func @f32_barrier() grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %bar = kernel.shared_alloc : memref<1xf32, 3 : i64>
  kernel.mbarrier_init %bar[%c0], 32 : memref<1xf32, 3 : i64>
  kernel.return
}
// CHECK: kernel.mbarrier_init: an mbarrier is an i64 in shared memory, got memref<1xf32, 3 : i64>

// -----

kernel.func @zero_arrivals() grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %bar = kernel.shared_alloc : memref<1xi64, 3 : i64>
  kernel.mbarrier_init %bar[%c0], 0 : memref<1xi64, 3 : i64>
  kernel.return
}
// CHECK: kernel.mbarrier_init: expects 1 to 1048575 arrivals, got 0

// -----

kernel.func @parity_two() grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %bar = kernel.shared_alloc : memref<1xi64, 3 : i64>
  kernel.mbarrier_wait %bar[%c0], %c2 : memref<1xi64, 3 : i64>
  kernel.return
}
// CHECK: kernel.mbarrier_wait: a phase parity is 0 or 1, got (2, 2)
