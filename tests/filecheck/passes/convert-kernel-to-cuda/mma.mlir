// kernel.mma_sync prints as one call of the device header's dd_mma_m16n8k16, whose overload
// (bf16 or f16 A and B) picks the PTX instruction; the unit carries cpu_simt.h's device part.
// RUN: deplodock-opt %s -t cuda | filecheck %s

builtin.module {
  kernel.func @mma(%x: memref<32x8xf16>, %y: memref<32x4xf16>, %z: memref<32x4xf32>) grid 1 block 32 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c5 = arith.constant 5 : index
    %c6 = arith.constant 6 : index
    %c7 = arith.constant 7 : index
    %zero = arith.constant 0.000000e+00 : f32
    %a0 = kernel.load %x[%t, %c0] : memref<32x8xf16>
    %a1 = kernel.load %x[%t, %c1] : memref<32x8xf16>
    %a2 = kernel.load %x[%t, %c2] : memref<32x8xf16>
    %a3 = kernel.load %x[%t, %c3] : memref<32x8xf16>
    %a4 = kernel.load %x[%t, %c4] : memref<32x8xf16>
    %a5 = kernel.load %x[%t, %c5] : memref<32x8xf16>
    %a6 = kernel.load %x[%t, %c6] : memref<32x8xf16>
    %a7 = kernel.load %x[%t, %c7] : memref<32x8xf16>
    %b0 = kernel.load %y[%t, %c0] : memref<32x4xf16>
    %b1 = kernel.load %y[%t, %c1] : memref<32x4xf16>
    %b2 = kernel.load %y[%t, %c2] : memref<32x4xf16>
    %b3 = kernel.load %y[%t, %c3] : memref<32x4xf16>
    %acc0, %acc1, %acc2, %acc3 = kernel.mma_sync a(%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7) b(%b0, %b1, %b2, %b3) c(%zero, %zero, %zero, %zero) : f16
    %sum = arith.addf %acc0, %acc3 : f32
    kernel.store %sum, %z[%t, %c0] : memref<32x4xf32>
    kernel.store %acc1, %z[%t, %c1] : memref<32x4xf32>
    kernel.store %acc2, %z[%t, %c2] : memref<32x4xf32>
    kernel.return
  }
}

// CHECK:      #include <cuda_fp16.h>
// CHECK-NOT:  #include <cpu_simt.h>
// CHECK:      // deplodock's device primitives (backend/cpu_simt.h, nvcc's side)
// CHECK-NEXT: #ifndef DEPLODOCK_DEVICE_PRIMITIVES
// CHECK:        const __half b3 = y[t * 4 + 3];
// CHECK-NEXT:   float acc0, acc1, acc2, acc3;
// CHECK-NEXT:   dd_mma_m16n8k16(acc0, acc1, acc2, acc3, a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, 0.0f, 0.0f, 0.0f, 0.0f);
// CHECK-NEXT:   z[t * 4] = acc0 + acc3;
// CHECK-NEXT:   z[t * 4 + 1] = acc1;
// CHECK-NEXT:   z[t * 4 + 2] = acc2;
// CHECK-NEXT: }
