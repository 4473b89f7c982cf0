// RUN: deplodock-opt %s | filecheck %s
// RUN: deplodock-opt %s | deplodock-opt | filecheck %s

// TMA tensor copies and mbarriers round-trip (common/tma.py).

builtin.module {
  kernel.func @stage(%a: memref<256x64xbf16>) grid 1 block 128 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %row = arith.constant 16 : index
    %s = kernel.shared_alloc : memref<2x16x64xbf16, 3 : i64>
    %bar = kernel.shared_alloc : memref<2xi64, 3 : i64>
    kernel.mbarrier_init %bar[%c0], 1 : memref<2xi64, 3 : i64>
    kernel.fence_proxy_async
    kernel.mbarrier_arrive %bar[%c0] expect_tx 2048 : memref<2xi64, 3 : i64>
    kernel.tma_load %s[%c1, %c0, %c0], %a[%row, %c0], %bar[%c0] swizzle 128 : memref<2x16x64xbf16, 3 : i64>, memref<256x64xbf16>, memref<2xi64, 3 : i64>
    kernel.mbarrier_wait %bar[%c0], %c0 : memref<2xi64, 3 : i64>
    kernel.mbarrier_arrive %bar[%c1] : memref<2xi64, 3 : i64>
    kernel.return
  }
}

// CHECK:      kernel.mbarrier_init %bar[%c0], 1 : memref<2xi64, 3 : i64>
// CHECK-NEXT: kernel.fence_proxy_async
// CHECK-NEXT: kernel.mbarrier_arrive %bar[%c0] expect_tx 2048 : memref<2xi64, 3 : i64>
// CHECK-NEXT: kernel.tma_load %s[%c1, %c0, %c0], %a[%row, %c0], %bar[%c0] swizzle 128 : memref<2x16x64xbf16, 3 : i64>, memref<256x64xbf16>, memref<2xi64, 3 : i64>
// CHECK-NEXT: kernel.mbarrier_wait %bar[%c0], %c0 : memref<2xi64, 3 : i64>
// CHECK-NEXT: kernel.mbarrier_arrive %bar[%c1] : memref<2xi64, 3 : i64>
