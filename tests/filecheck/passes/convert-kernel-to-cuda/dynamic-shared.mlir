// RUN: deplodock-opt %s -p convert-kernel-to-cuda | deplodock-opt -t cuda | filecheck %s

// Past the static 48 KiB (here 40 KiB + 16,388 bytes), a kernel's shared arrays are carved
// out of dynamic shared memory: one DD_DYNAMIC_SHARED per array, each starting on a 16-byte
// boundary, so the block takes 57,360 bytes (%b's 16,388 rounded up). Every launch asks for
// that many, and the host code opts the kernel in once, before its first launch.

builtin.module {
  kernel.func @big(%x: memref<64xf32>, %y: memref<64xf32>) grid 1 block 64 {
    %t = kernel.thread_id : index
    %a = kernel.shared_alloc : memref<10240xf32, 3>
    %b = kernel.shared_alloc : memref<4097xf32, 3>
    %v = kernel.load %x[%t] : memref<64xf32>
    kernel.store %v, %a[%t] : memref<10240xf32, 3>
    kernel.store %v, %b[%t] : memref<4097xf32, 3>
    kernel.barrier
    %u = kernel.load %a[%t] : memref<10240xf32, 3>
    %w = kernel.load %b[%t] : memref<4097xf32, 3>
    %s = arith.addf %u, %w : f32
    kernel.store %s, %y[%t] : memref<64xf32>
    kernel.return
  }
  func.func @forward(%x: memref<64xf32> {deplodock.input = "x"}) -> memref<64xf32> {
    %y = kernel.alloc : memref<64xf32>
    kernel.launch @big(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
    kernel.launch @big(%y, %y) : (memref<64xf32>, memref<64xf32>) -> ()
    func.return %y : memref<64xf32>
  }
}

// CHECK-NOT:  #include <cpu_simt.h>
// CHECK:      // deplodock's device primitives (backend/cpu_simt.h, nvcc's side)
// CHECK-NEXT: #ifndef DEPLODOCK_DEVICE_PRIMITIVES
// CHECK:      // @big: grid 1, block 64, dynamic smem 57360 bytes
// CHECK:        DD_DYNAMIC_SHARED(float, a, 10240, 0);
// CHECK-NEXT:   DD_DYNAMIC_SHARED(float, b, 4097, 40960);
// CHECK-NOT:  __shared__
// CHECK:      extern "C" int deplodock_forward(
// CHECK:        DEPLODOCK_CHECK(cudaFuncSetAttribute(big, cudaFuncAttributeMaxDynamicSharedMemorySize, 57360));
// CHECK-NOT:  cudaFuncSetAttribute
// CHECK:        big<<<1, 64, 57360>>>(x, out0);
// CHECK:        big<<<1, 64, 57360>>>(out0, out0);
