// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

cuda.kernel @k grid 0 block 64 smem 0 args [] source "k"
// CHECK: cuda.kernel @k: grid must be >= 1, got 0

// -----

cuda.kernel @k grid 1 block 2048 smem 0 args [] source "k"
// CHECK: cuda.kernel @k: block must be in [1, 1024], got 2048

// -----

cuda.kernel @k grid 1 block 32 smem -4 args [] source "k"
// CHECK: cuda.kernel @k: smem must be >= 0, got -4

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [memref<4xf32>, f32] source "k"
// CHECK: cuda.kernel @k: argument 1 must be a memref type, got f32

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [] source ""
// CHECK: cuda.kernel @k: source must not be empty

// -----

func.func @forward(%x: memref<4xf32>) {
  cuda.launch @missing(%x) : (memref<4xf32>) -> ()
  func.return
}
// CHECK: cuda.launch: '@missing' could not be found in symbol table

// -----

func.func @other() {
  func.return
}
func.func @forward(%x: memref<4xf32>) {
  cuda.launch @other(%x) : (memref<4xf32>) -> ()
  func.return
}
// CHECK: cuda.launch: '@other' is not a cuda.kernel

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [memref<4xf32>, memref<4xf32>] source "k"
func.func @forward(%x: memref<4xf32>) {
  cuda.launch @k(%x) : (memref<4xf32>) -> ()
  func.return
}
// CHECK: cuda.launch: '@k' takes 2 arguments, got 1

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [memref<4xf32>] source "k"
func.func @forward(%x: memref<8xf32>) {
  cuda.launch @k(%x) : (memref<8xf32>) -> ()
  func.return
}
// CHECK: cuda.launch: argument 0 of '@k' has type memref<8xf32>, expected memref<4xf32>
