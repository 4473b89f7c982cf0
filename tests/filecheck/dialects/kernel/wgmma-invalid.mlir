// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

// What a wgmma cannot take: a block that is not whole warpgroups, an N that is no multiple
// of 8, A and B of different types, a descriptor field that is no multiple of 16.

kernel.func @warps(%x: memref<4xf32>) grid 1 block 96 {
  %a = kernel.shared_alloc : memref<64x16xbf16, 3>
  %k0 = arith.constant 0 : index
  %z = arith.constant 0.000000e+00 : f32
  %da = kernel.wgmma_desc %a[%k0, %k0] swizzle 0 lbo 128 sbo 256 : memref<64x16xbf16, 3>
  %d0, %d1, %d2, %d3 = kernel.wgmma m64n8k16 %a(%da), %a(%da) c(%z, %z, %z, %z) : memref<64x16xbf16, 3>, memref<64x16xbf16, 3>
  kernel.return
}
// CHECK: kernel.wgmma: runs on warpgroups of 128 threads, but the block has 96

// -----

kernel.func @n6(%x: memref<4xf32>) grid 1 block 128 {
  %a = kernel.shared_alloc : memref<64x16xbf16, 3>
  %k0 = arith.constant 0 : index
  %z = arith.constant 0.000000e+00 : f32
  %da = kernel.wgmma_desc %a[%k0, %k0] swizzle 0 lbo 128 sbo 256 : memref<64x16xbf16, 3>
  %d0, %d1, %d2 = kernel.wgmma m64n6k16 %a(%da), %a(%da) c(%z, %z, %z) : memref<64x16xbf16, 3>, memref<64x16xbf16, 3>
  kernel.return
}
// CHECK: kernel.wgmma: N must be a multiple of 8 from 8 to 256 (N / 2 accumulator values), got 3 values

// -----

kernel.func @mixed(%x: memref<4xf32>) grid 1 block 128 {
  %a = kernel.shared_alloc : memref<64x16xbf16, 3>
  %b = kernel.shared_alloc : memref<8x16xf16, 3>
  %k0 = arith.constant 0 : index
  %z = arith.constant 0.000000e+00 : f32
  %da = kernel.wgmma_desc %a[%k0, %k0] swizzle 0 lbo 128 sbo 256 : memref<64x16xbf16, 3>
  %db = kernel.wgmma_desc %b[%k0, %k0] swizzle 0 lbo 128 sbo 256 : memref<8x16xf16, 3>
  %d0, %d1, %d2, %d3 = kernel.wgmma m64n8k16 %a(%da), %b(%db) c(%z, %z, %z, %z) : memref<64x16xbf16, 3>, memref<8x16xf16, 3>
  kernel.return
}
// CHECK: kernel.wgmma: A and B must have one element type, got bf16 and f16

// -----

kernel.func @lbo(%x: memref<4xf32>) grid 1 block 128 {
  %a = kernel.shared_alloc : memref<64x16xbf16, 3>
  %k0 = arith.constant 0 : index
  %da = kernel.wgmma_desc %a[%k0, %k0] swizzle 0 lbo 120 sbo 256 : memref<64x16xbf16, 3>
  kernel.return
}
// CHECK: kernel.wgmma_desc: descriptor lbo must be a multiple of 16 below 2^18, got 120
