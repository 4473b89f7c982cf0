// RUN: deplodock-opt %s | filecheck %s
// RUN: deplodock-opt %s | deplodock-opt | filecheck %s

// Asynchronous copies (cp.async + commit + wait) and vector accesses round-trip.

builtin.module {
  kernel.func @stage(%x: memref<64x64xf32>, %h: memref<64x64xf16>, %y: memref<64x64xf32>) grid 1 block 32 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %s = kernel.shared_alloc : memref<8x64xf32, 3 : i64>
    %sh = kernel.shared_alloc : memref<64xf16, 3 : i64>
    %col = arith.muli %t, %c4 : index
    %p = arith.cmpi ult, %t, %c4 : index
    kernel.cp_async %s[%c0, %col], %x[%c0, %col], 16 : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
    kernel.cp_async %s[%c4, %col], %x[%c4, %col], 8 if %p : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
    kernel.cp_async %sh[%c0], %h[%c0, %c4], 4 : memref<64xf16, 3 : i64>, memref<64x64xf16>
    kernel.cp_async_commit
    kernel.cp_async_wait 0
    kernel.barrier
    %a, %b, %c, %d = kernel.load_vector %s[%c0, %col] width 4 : memref<8x64xf32, 3 : i64>
    %e, %f = kernel.load_vector %x[%t, %c4] width 2 : memref<64x64xf32>
    kernel.store_vector %a, %b, %c, %d, %y[%t, %col] : memref<64x64xf32>
    kernel.store_vector %e, %f, %y[%t, %c0] : memref<64x64xf32>
    %g0, %g1, %g2, %g3 = kernel.load_vector %h[%t, %c4] width 4 : memref<64x64xf16>
    kernel.return
  }
}

// CHECK:      kernel.cp_async %s[%c0, %col], %x[%c0, %col], 16 : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
// CHECK-NEXT: kernel.cp_async %s[%c4, %col], %x[%c4, %col], 8 if %p : memref<8x64xf32, 3 : i64>, memref<64x64xf32>
// CHECK-NEXT: kernel.cp_async %sh[%c0], %h[%c0, %c4], 4 : memref<64xf16, 3 : i64>, memref<64x64xf16>
// CHECK-NEXT: kernel.cp_async_commit
// CHECK-NEXT: kernel.cp_async_wait 0
// CHECK-NEXT: kernel.barrier
// CHECK-NEXT: %a, %b, %c, %d = kernel.load_vector %s[%c0, %col] width 4 : memref<8x64xf32, 3 : i64>
// CHECK-NEXT: %e, %f = kernel.load_vector %x[%t, %c4] width 2 : memref<64x64xf32>
// CHECK-NEXT: kernel.store_vector %a, %b, %c, %d, %y[%t, %col] : memref<64x64xf32>
// CHECK-NEXT: kernel.store_vector %e, %f, %y[%t, %c0] : memref<64x64xf32>
// CHECK-NEXT: %g0, %g1, %g2, %g3 = kernel.load_vector %h[%t, %c4] width 4 : memref<64x64xf16>
