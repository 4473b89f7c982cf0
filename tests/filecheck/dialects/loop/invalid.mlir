// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

loop.kernel @k(%x: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %v = loop.load %x[%c0] : memref<4x8xf32>
  loop.return
}
// CHECK: loop.load: expected 2 indices for memref<4x8xf32>, got 1

// -----

loop.kernel @k(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %v = arith.constant 1.000000e+00 : f32
  loop.store %v, %x[%c0, %c1] : memref<4xf32>
  loop.return
}
// CHECK: loop.store: expected 1 indices for memref<4xf32>, got 2

// -----

loop.kernel @k(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %v = arith.constant 1.000000e+00 : f16
  "loop.store"(%v, %x, %c0) : (f16, memref<4xf32>, index) -> ()
  loop.return
}
// The value's type and the buffer's element type are one constraint variable (`T`) of the
// declarative format, so IRDL itself rejects the mismatch.
// CHECK:      operand 'memref' at position 1 does not verify:
// CHECK-NEXT: attribute f16 expected from variable 'T', but got f32

// -----

loop.kernel @k(%x: memref<4xf32>) {
  %z = arith.constant 0.000000e+00 : f32
  %s = loop.for %i = 0 to 4 iter_args(%a = %z) -> (f32) {
    %h = arith.constant 0.000000e+00 : f16
    loop.yield %h : f16
  }
  loop.return
}
// CHECK: loop.for: yield types (f16) differ from iter_args types (f32)

// -----

loop.kernel @k(%x: memref<4xf32>) {
  %z = arith.constant 0.000000e+00 : f32
  %s = "loop.for"(%z) <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64}> ({
  ^bb0(%i: index, %a: f32):
    loop.yield %a : f32
  }) : (f32) -> f16
  loop.return
}
// CHECK: loop.for: result types (f16) differ from iter_args types (f32)

// -----

loop.kernel @k(%x: memref<4xf32>) {
  loop.for %i = 0 to 4 step 0 {
  }
  loop.return
}
// CHECK: loop.for: step must be positive, got 0

// -----

loop.kernel @k(%x: f32) {
  loop.return
}
// CHECK: loop.kernel @k: argument #0 must be a memref, got f32

// -----

func.func @forward(%x: memref<4xf32>) {
  loop.launch @missing(%x) : (memref<4xf32>) -> ()
  func.return
}
// CHECK: loop.launch: no kernel named @missing

// -----

loop.kernel @k(%x: memref<4xf32>, %y: memref<4xf32>) {
  loop.return
}
func.func @forward(%x: memref<4xf32>) {
  loop.launch @k(%x) : (memref<4xf32>) -> ()
  func.return
}
// CHECK: loop.launch: argument types of @k differ: kernel takes (memref<4xf32>, memref<4xf32>), launch passes (memref<4xf32>)

// -----

func.func @forward(%x: memref<4xf32>) {
  loop.launch @forward(%x) : (memref<4xf32>) -> ()
  func.return
}
// CHECK: loop.launch: @forward is a func.func, not a kernel

// -----

loop.kernel @k(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %v = loop.load %x[%c0] : memref<4xf32>
}
// CHECK: Operation loop.load terminates block in single-block region but is not a terminator

// -----

func.func @forward() {
  loop.yield
}
// CHECK: 'loop.yield' expects parent op 'loop.for'
