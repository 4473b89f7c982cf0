// RUN: deplodock-opt %s | deplodock-opt | filecheck %s

// The sm_90a warpgroup MMA round-trips: a descriptor per operand, the fence, one m64n8k16
// wgmma on four accumulator registers per thread, its commit and its wait.

builtin.module {
  kernel.func @wg(%x: memref<128x4xf32>) grid 1 block 128 {
    %a = kernel.shared_alloc : memref<64x16xbf16, 3>
    %b = kernel.shared_alloc : memref<8x16xbf16, 3>
    %k0 = arith.constant 0 : index
    %z = arith.constant 0.000000e+00 : f32
    %da = kernel.wgmma_desc %a[%k0, %k0] swizzle 32 lbo 16 sbo 256 : memref<64x16xbf16, 3>
    %db = kernel.wgmma_desc %b[%k0, %k0] swizzle 0 lbo 128 sbo 256 : memref<8x16xbf16, 3>
    kernel.wgmma_fence
    %d0, %d1, %d2, %d3 = kernel.wgmma m64n8k16 %a(%da), %b(%db) c(%z, %z, %z, %z) : memref<64x16xbf16, 3>, memref<8x16xbf16, 3>
    kernel.wgmma_commit
    kernel.wgmma_wait 0
    kernel.return
  }
}

// CHECK:      %da = kernel.wgmma_desc %a[%k0, %k0] swizzle 32 lbo 16 sbo 256 : memref<64x16xbf16, 3 : i64>
// CHECK-NEXT: %db = kernel.wgmma_desc %b[%k0, %k0] swizzle 0 lbo 128 sbo 256 : memref<8x16xbf16, 3 : i64>
// CHECK-NEXT: kernel.wgmma_fence
// CHECK-NEXT: %d0, %d1, %d2, %d3 = kernel.wgmma m64n8k16 %a(%da), %b(%db) c(%z, %z, %z, %z) : memref<64x16xbf16, 3 : i64>, memref<8x16xbf16, 3 : i64>
// CHECK-NEXT: kernel.wgmma_commit
// CHECK-NEXT: kernel.wgmma_wait 0
