// kernel.split_tf32 prints as `float hi, lo;` and one call of the device header's
// dd_split_tf32; a tf32 kernel.mma_sync as one call of dd_mma_m16n8k8_tf32 (4 A and 2 B
// floats). Both come from cpu_simt.h, whose device part the translation unit carries.
// RUN: deplodock-opt %s -t cuda | filecheck %s

builtin.module {
  kernel.func @mma(%x: memref<32x6xf32>, %z: memref<32x4xf32>) grid 1 block 32 {
    %t = kernel.thread_id : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c4 = arith.constant 4 : index
    %c5 = arith.constant 5 : index
    %zero = arith.constant 0.000000e+00 : f32
    %x0 = kernel.load %x[%t, %c0] : memref<32x6xf32>
    %x1 = kernel.load %x[%t, %c1] : memref<32x6xf32>
    %x2 = kernel.load %x[%t, %c2] : memref<32x6xf32>
    %x3 = kernel.load %x[%t, %c3] : memref<32x6xf32>
    %x4 = kernel.load %x[%t, %c4] : memref<32x6xf32>
    %x5 = kernel.load %x[%t, %c5] : memref<32x6xf32>
    %a0, %a0_lo = kernel.split_tf32 %x0
    %a1, %a1_lo = kernel.split_tf32 %x1
    %a2, %a2_lo = kernel.split_tf32 %x2
    %a3, %a3_lo = kernel.split_tf32 %x3
    %b0, %b0_lo = kernel.split_tf32 %x4
    %b1, %b1_lo = kernel.split_tf32 %x5
    %acc0, %acc1, %acc2, %acc3 = kernel.mma_sync a(%a0, %a1, %a2, %a3) b(%b0, %b1) c(%zero, %zero, %zero, %zero) : tf32
    kernel.store %acc0, %z[%t, %c0] : memref<32x4xf32>
    kernel.store %acc1, %z[%t, %c1] : memref<32x4xf32>
    kernel.store %acc2, %z[%t, %c2] : memref<32x4xf32>
    kernel.store %acc3, %z[%t, %c3] : memref<32x4xf32>
    kernel.return
  }
}

// CHECK-NOT:  #include <cpu_simt.h>
// CHECK:      // deplodock's device primitives (backend/cpu_simt.h, nvcc's side)
// CHECK-NEXT: #ifndef DEPLODOCK_DEVICE_PRIMITIVES
// CHECK:        float a0, a0_lo;
// CHECK-NEXT:   dd_split_tf32(x0, a0, a0_lo);
// CHECK:        float b1, b1_lo;
// CHECK-NEXT:   dd_split_tf32(x5, b1, b1_lo);
// CHECK-NEXT:   float acc0, acc1, acc2, acc3;
// CHECK-NEXT:   dd_mma_m16n8k8_tf32(acc0, acc1, acc2, acc3, a0, a1, a2, a3, b0, b1, 0.0f, 0.0f, 0.0f, 0.0f);
