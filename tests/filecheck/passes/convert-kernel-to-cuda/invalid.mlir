// RUN: deplodock-opt %s -p convert-kernel-to-cuda --split-input-file --verify-diagnostics | filecheck %s

kernel.func @pop(%x: memref<32xi32>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %v = kernel.load %x[%t] : memref<32xi32>
  %p = math.ctpop %v : i32
  kernel.store %p, %x[%t] : memref<32xi32>
  kernel.return
}
// CHECK: convert-kernel-to-cuda: @pop: no CUDA C translation for math.ctpop

// -----

kernel.func @vec(%x: memref<32xvector<4xf32>>) grid 1 block 32 {
  %t = kernel.thread_id : index
  %v = kernel.load %x[%t] : memref<32xvector<4xf32>>
  kernel.store %v, %x[%t] : memref<32xvector<4xf32>>
  kernel.return
}
// CHECK: convert-kernel-to-cuda: @vec: no CUDA C type for vector<4xf32>
