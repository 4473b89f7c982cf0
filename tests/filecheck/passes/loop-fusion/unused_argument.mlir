// RUN: deplodock-opt %s -p loop-fusion | filecheck %s

// A kernel that no longer touches one of its buffers (here written so; in a decode step,
// the cache row index `clamp(r - position, 0, T - 1)` folds to 0 when T = 1 once fused)
// loses that argument, at its launch too; the launch that wrote the buffer then writes
// something nobody reads, and goes with its buffer and its kernel.

// CHECK-NOT:   @index_kernel
// CHECK-LABEL: loop.kernel @copy_kernel(%x: memref<8xf32>, %y: memref<8xf32>)
// CHECK-LABEL: func.func @forward
// CHECK-NEXT:    %y = loop.alloc : memref<8xf32>
// CHECK-NEXT:    loop.launch @copy_kernel(%x, %y) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:    func.return %y

builtin.module {
  loop.kernel @index_kernel(%p: memref<1xi64>, %idx: memref<8xi64>) {
    %c0 = arith.constant 0 : index
    %v = loop.load %p[%c0] : memref<1xi64>
    loop.for %i = 0 to 8 {
      %j = arith.index_cast %i : index to i64
      %d = arith.subi %j, %v : i64
      loop.store %d, %idx[%i] : memref<8xi64>
    }
    loop.return
  }
  loop.kernel @copy_kernel(%idx: memref<8xi64>, %x: memref<8xf32>, %y: memref<8xf32>) {
    loop.for %i = 0 to 8 {
      %v = loop.load %x[%i] : memref<8xf32>
      loop.store %v, %y[%i] : memref<8xf32>
    }
    loop.return
  }
  func.func @forward(%p: memref<1xi64>, %x: memref<8xf32>) -> memref<8xf32> {
    %idx = loop.alloc : memref<8xi64>
    loop.launch @index_kernel(%p, %idx) : (memref<1xi64>, memref<8xi64>) -> ()
    %y = loop.alloc : memref<8xf32>
    loop.launch @copy_kernel(%idx, %x, %y) : (memref<8xi64>, memref<8xf32>, memref<8xf32>) -> ()
    func.return %y : memref<8xf32>
  }
}
