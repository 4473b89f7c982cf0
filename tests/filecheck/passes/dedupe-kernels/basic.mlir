// RUN: deplodock-opt %s -p dedupe-kernels | filecheck %s

// Two kernels that differ only in their names and value names become one; the third
// (a different constant) stays. Every launch of @relu_2 now calls @relu.
builtin.module {
  loop.kernel @relu(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to 4 {
      loop.for %j = 0 to 8 {
        %v = loop.load %x[%i, %j] : memref<4x8xf32>
        %r = arith.maximumf %v, %zero : f32
        loop.store %r, %y[%i, %j] : memref<4x8xf32>
      }
    }
    loop.return
  }
  loop.kernel @relu_2(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
    %c = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to 4 {
      loop.for %j = 0 to 8 {
        %v = loop.load %a[%i, %j] : memref<4x8xf32>
        %r = arith.maximumf %v, %c : f32
        loop.store %r, %b[%i, %j] : memref<4x8xf32>
      }
    }
    loop.return
  }
  loop.kernel @clamp(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
    %c = arith.constant 1.000000e+00 : f32
    loop.for %i = 0 to 4 {
      loop.for %j = 0 to 8 {
        %v = loop.load %a[%i, %j] : memref<4x8xf32>
        %r = arith.maximumf %v, %c : f32
        loop.store %r, %b[%i, %j] : memref<4x8xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x: memref<4x8xf32>) -> memref<4x8xf32> {
    %y = loop.alloc : memref<4x8xf32>
    loop.launch @relu(%x, %y) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    %z = loop.alloc : memref<4x8xf32>
    loop.launch @relu_2(%y, %z) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    %w = loop.alloc : memref<4x8xf32>
    loop.launch @clamp(%z, %w) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    func.return %w : memref<4x8xf32>
  }
}

// CHECK:       loop.kernel @relu(
// CHECK-NOT:   loop.kernel @relu_2
// CHECK:       loop.kernel @clamp(
// CHECK:       func.func @forward
// CHECK:         loop.launch @relu(%x, %y)
// CHECK-NEXT:    %z = loop.alloc
// CHECK-NEXT:    loop.launch @relu(%y, %z)
// CHECK:         loop.launch @clamp(%z, %w)
