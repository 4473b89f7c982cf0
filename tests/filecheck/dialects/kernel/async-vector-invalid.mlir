// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

kernel.func @twelve_bytes(%x: memref<64xf32>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %s = kernel.shared_alloc : memref<64xf32, 3 : i64>
  kernel.cp_async %s[%c0], %x[%c0], 12 : memref<64xf32, 3 : i64>, memref<64xf32>
  kernel.return
}
// CHECK: kernel.cp_async: copies 12 bytes, expected one of 4, 8, 16

// -----

kernel.func @into_global(%x: memref<64xf32>, %y: memref<64xf32>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  kernel.cp_async %y[%c0], %x[%c0], 16 : memref<64xf32>, memref<64xf32>
  kernel.return
}
// CHECK: kernel.cp_async: destination must be shared memory (memref<..., 3>), got memref<64xf32>

// -----

kernel.func @from_shared(%x: memref<64xf32>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %s = kernel.shared_alloc : memref<64xf32, 3 : i64>
  %r = kernel.shared_alloc : memref<64xf32, 3 : i64>
  kernel.cp_async %s[%c0], %r[%c0], 16 : memref<64xf32, 3 : i64>, memref<64xf32, 3 : i64>
  kernel.return
}
// CHECK: kernel.cp_async: source must be global memory, got memref<64xf32, 3 : i64>

// -----

kernel.func @partial_element(%x: memref<64xf64>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %s = kernel.shared_alloc : memref<64xf64, 3 : i64>
  kernel.cp_async %s[%c0], %x[%c0], 4 : memref<64xf64, 3 : i64>, memref<64xf64>
  kernel.return
}
// CHECK: kernel.cp_async: 4 bytes is not a whole number of 8-byte elements

// -----

kernel.func @straddles_rows(%x: memref<6x6xf32>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %s = kernel.shared_alloc : memref<64xf32, 3 : i64>
  kernel.cp_async %s[%c0], %x[%c0, %c0], 16 : memref<64xf32, 3 : i64>, memref<6x6xf32>
  kernel.return
}
// CHECK: kernel.cp_async: copy of 4 consecutive elements, but the innermost extent 6 of memref<6x6xf32> is not a multiple of 4

// -----

kernel.func @misaligned_copy(%x: memref<64xf32>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %s = kernel.shared_alloc : memref<64xf32, 3 : i64>
  kernel.cp_async %s[%c0], %x[%c2], 16 : memref<64xf32, 3 : i64>, memref<64xf32>
  kernel.return
}
// CHECK: kernel.cp_async: innermost index 2 is misaligned: a copy of 4 elements must start at a multiple of 4

// -----

kernel.func @negative_wait(%x: memref<64xf32>) grid 1 block 32 {
  kernel.cp_async_wait -1
  kernel.return
}
// CHECK: kernel.cp_async_wait: the number of groups left pending must be >= 0, got -1

// -----

kernel.func @misaligned_vector(%x: memref<64xf32>) grid 1 block 32 {
  %c6 = arith.constant 6 : index
  %a, %b, %c, %d = kernel.load_vector %x[%c6] width 4 : memref<64xf32>
  kernel.return
}
// CHECK: kernel.load_vector: innermost index 6 is misaligned: a vector access of 4 elements must start at a multiple of 4

// -----

kernel.func @odd_extent(%x: memref<3x10xf32>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %a, %b, %c, %d = kernel.load_vector %x[%c0, %c0] width 4 : memref<3x10xf32>
  kernel.return
}
// CHECK: kernel.load_vector: vector access of 4 consecutive elements, but the innermost extent 10 of memref<3x10xf32> is not a multiple of 4

// -----

kernel.func @width_three(%x: memref<60xf32>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %a, %b, %c = kernel.load_vector %x[%c0] width 3 : memref<60xf32>
  kernel.return
}
// CHECK: kernel.load_vector: width 3, expected one of 2, 4

// -----

kernel.func @too_wide(%x: memref<64xf64>) grid 1 block 32 {
  %c0 = arith.constant 0 : index
  %a, %b, %c, %d = kernel.load_vector %x[%c0] width 4 : memref<64xf64>
  kernel.store_vector %a, %b, %c, %d, %x[%c0] : memref<64xf64>
  kernel.return
}
// CHECK: kernel.load_vector: 4 x f64 is 32 bytes, expected a vector of 4, 8 or 16 bytes

// -----

kernel.func @store_misaligned(%x: memref<64xf32>) grid 1 block 32 {
  %c1 = arith.constant 1 : index
  %v = arith.constant 1.0 : f32
  kernel.store_vector %v, %v, %x[%c1] : memref<64xf32>
  kernel.return
}
// CHECK: kernel.store_vector: innermost index 1 is misaligned: a vector access of 2 elements must start at a multiple of 2
