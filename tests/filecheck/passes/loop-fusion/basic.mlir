// RUN: deplodock-opt %s -p loop-fusion --split-input-file | filecheck %s

// The producer's element is recomputed at the consumer's (transposed) indices; the
// producer's launch, kernel and buffer go away.
builtin.module {
  loop.kernel @p(%x: memref<4x8xf32>, %e: memref<4x8xf32>) {
    loop.for %i = 0 to 4 {
      loop.for %j = 0 to 8 {
        %v = loop.load %x[%i, %j] : memref<4x8xf32>
        %w = math.exp %v : f32
        loop.store %w, %e[%i, %j] : memref<4x8xf32>
      }
    }
    loop.return
  }
  loop.kernel @c(%e: memref<4x8xf32>, %t: memref<8x4xf32>) {
    loop.for %a = 0 to 8 {
      loop.for %b = 0 to 4 {
        %v = loop.load %e[%b, %a] : memref<4x8xf32>
        loop.store %v, %t[%a, %b] : memref<8x4xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x: memref<4x8xf32>) -> memref<8x4xf32> {
    %e = loop.alloc : memref<4x8xf32>
    loop.launch @p(%x, %e) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    %t = loop.alloc : memref<8x4xf32>
    loop.launch @c(%e, %t) : (memref<4x8xf32>, memref<8x4xf32>) -> ()
    func.return %t : memref<8x4xf32>
  }
}

// CHECK-NOT:  loop.kernel @p
// CHECK:      loop.kernel @c_kernel(%x: memref<4x8xf32>, %t: memref<8x4xf32>) {
// CHECK-NEXT:   loop.for %a = 0 to 8 {
// CHECK-NEXT:     loop.for %b = 0 to 4 {
// CHECK-NEXT:       %v = loop.load %x[%b, %a] : memref<4x8xf32>
// CHECK-NEXT:       %w = math.exp %v : f32
// CHECK-NEXT:       loop.store %w, %t[%a, %b] : memref<8x4xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   loop.return
// CHECK-NEXT: }
// CHECK-NEXT: func.func @forward(%x: memref<4x8xf32>) -> memref<8x4xf32> {
// CHECK-NEXT:   %t = loop.alloc : memref<8x4xf32>
// CHECK-NEXT:   loop.launch @c_kernel(%x, %t) : (memref<4x8xf32>, memref<8x4xf32>) -> ()
// CHECK-NEXT:   func.return %t : memref<8x4xf32>
// CHECK-NEXT: }

// -----

// A producer whose buffer is also a result of @forward is inlined but kept; a producer
// with several stores (a concat) is not inlined.
builtin.module {
  loop.kernel @p(%x: memref<4xf32>, %e: memref<4xf32>) {
    loop.for %i = 0 to 4 {
      %v = loop.load %x[%i] : memref<4xf32>
      %w = math.exp %v : f32
      loop.store %w, %e[%i] : memref<4xf32>
    }
    loop.return
  }
  loop.kernel @cat(%x: memref<4xf32>, %y: memref<8xf32>) {
    %c4 = arith.constant 4 : index
    loop.for %i = 0 to 4 {
      %v = loop.load %x[%i] : memref<4xf32>
      loop.store %v, %y[%i] : memref<8xf32>
    }
    loop.for %i = 4 to 8 {
      %j = arith.subi %i, %c4 : index
      %v = loop.load %x[%j] : memref<4xf32>
      loop.store %v, %y[%i] : memref<8xf32>
    }
    loop.return
  }
  loop.kernel @c(%e: memref<4xf32>, %y: memref<8xf32>, %z: memref<4xf32>) {
    loop.for %i = 0 to 4 {
      %a = loop.load %e[%i] : memref<4xf32>
      %b = loop.load %y[%i] : memref<8xf32>
      %s = arith.addf %a, %b : f32
      loop.store %s, %z[%i] : memref<4xf32>
    }
    loop.return
  }
  func.func @forward(%x: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
    %e = loop.alloc : memref<4xf32>
    loop.launch @p(%x, %e) : (memref<4xf32>, memref<4xf32>) -> ()
    %y = loop.alloc : memref<8xf32>
    loop.launch @cat(%x, %y) : (memref<4xf32>, memref<8xf32>) -> ()
    %z = loop.alloc : memref<4xf32>
    loop.launch @c(%e, %y, %z) : (memref<4xf32>, memref<8xf32>, memref<4xf32>) -> ()
    func.return %e, %z : memref<4xf32>, memref<4xf32>
  }
}

// CHECK:      loop.kernel @p_kernel(
// CHECK:      loop.kernel @cat_kernel(
// CHECK:      loop.kernel @c_kernel(%x: memref<4xf32>, %y: memref<8xf32>, %z: memref<4xf32>) {
// CHECK-NEXT:   loop.for %i = 0 to 4 {
// CHECK-NEXT:     %v = loop.load %x[%i] : memref<4xf32>
// CHECK-NEXT:     %w = math.exp %v : f32
// CHECK-NEXT:     %b = loop.load %y[%i] : memref<8xf32>
// CHECK-NEXT:     %s = arith.addf %w, %b : f32
// CHECK-NEXT:     loop.store %s, %z[%i] : memref<4xf32>
// CHECK-NEXT:   }
// CHECK:      func.func @forward(%x: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
// CHECK-NEXT:   %e = loop.alloc : memref<4xf32>
// CHECK-NEXT:   loop.launch @p_kernel(%x, %e) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:   %y = loop.alloc : memref<8xf32>
// CHECK-NEXT:   loop.launch @cat_kernel(%x, %y) : (memref<4xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:   %z = loop.alloc : memref<4xf32>
// CHECK-NEXT:   loop.launch @c_kernel(%x, %y, %z) : (memref<4xf32>, memref<8xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:   func.return %e, %z : memref<4xf32>, memref<4xf32>
// CHECK-NEXT: }
