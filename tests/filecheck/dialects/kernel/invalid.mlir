// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

kernel.func @too_many_threads(%x: memref<4xf32>) grid 1 block 2048 {
  kernel.return
}
// CHECK: kernel.func @too_many_threads: block of 2048 threads must be a positive multiple of 32 and at most 1024

// -----

kernel.func @not_a_warp_multiple(%x: memref<4xf32>) grid 1 block 48 {
  kernel.return
}
// CHECK: kernel.func @not_a_warp_multiple: block of 48 threads must be a positive multiple of 32 and at most 1024

// -----

// Past 48 KiB a kernel's arrays are dynamic shared memory; 99 KiB (101376 bytes) is the most
// every GPU of compute capability 8.0 or newer lets a block opt in to.
kernel.func @too_much_shared(%x: memref<4xf32>) grid 1 block 32 {
  %a = kernel.shared_alloc : memref<16384xf32, 3>
  %b = kernel.shared_alloc : memref<8961xf32, 3>
  kernel.return
}
// CHECK: kernel.func @too_much_shared: 101380 bytes of shared memory exceed the 101376 bytes a block may have

// -----

kernel.func @barrier_in_if(%x: memref<4xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %c0 = arith.constant 0 : index
  %p = arith.cmpi eq, %t, %c0 : index
  kernel.if %p {
    kernel.barrier
  }
  kernel.return
}
// CHECK: kernel.barrier: must not be nested in a kernel.if (divergent control flow)

// -----

kernel.func @barrier_in_thread_loop(%x: memref<64xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %c1 = arith.constant 1 : index
  %start = arith.addi %t, %c1 : index
  kernel.for %i = %start to 64 step 32 {
    kernel.barrier
  }
  kernel.return
}
// CHECK: kernel.barrier: must not be nested in a kernel.for whose bounds depend on kernel.thread_id (divergent control flow)

// -----

kernel.func @barrier_in_nested_loop(%x: memref<64xf32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %c0 = arith.constant 0 : index
  kernel.for %i = %t to 64 step 32 {
    kernel.for %j = %c0 to 4 {
      kernel.barrier
    }
  }
  kernel.return
}
// CHECK: kernel.barrier: must not be nested in a kernel.for whose bounds depend on kernel.thread_id (divergent control flow)

// -----

kernel.func @bad_shfl(%x: memref<4xf32>) grid 1 block 32 {
  %c = arith.constant 1.000000e+00 : f32
  %s = kernel.shfl_xor %c, 32 : f32
  kernel.return
}
// CHECK: kernel.shfl_xor: mask 32 must be in [0, 32) (within a warp)

// -----

kernel.func @global_shared_alloc(%x: memref<4xf32>) grid 1 block 32 {
  %a = kernel.shared_alloc : memref<8xf32>
  kernel.return
}
// CHECK: kernel.shared_alloc: result must be in memory space 3 (shared), got memref<8xf32>

// -----

kernel.func @k(%x: memref<4xf32>) grid 1 block 32 {
  kernel.return
}
func.func @forward(%x: memref<8xf32>) {
  kernel.launch @k(%x) : (memref<8xf32>) -> ()
  func.return
}
// CHECK: kernel.launch: argument types of @k differ
