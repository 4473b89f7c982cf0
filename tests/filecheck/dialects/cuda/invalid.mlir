// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

cuda.kernel @k grid 0 block 64 smem 0 args [] readonly [] includes [] source "k"
// CHECK: cuda.kernel @k: grid must be >= 1, got 0

// -----

cuda.kernel @k grid 1 block 2048 smem 0 args [] readonly [] includes [] source "k"
// CHECK: cuda.kernel @k: block must be in [1, 1024], got 2048

// -----

cuda.kernel @k grid 1 block 32 smem -4 args [] readonly [] includes [] source "k"
// CHECK: cuda.kernel @k: smem must be >= 0, got -4

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [memref<4xf32>, f32] readonly [true, false] includes [] source "k"
// CHECK: cuda.kernel @k: argument 1 must be a memref type, got f32

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [] readonly [] includes [] source ""
// CHECK: cuda.kernel @k: source must not be empty

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [memref<4xf32>, memref<4xf32>] readonly [true] includes [] source "k"
// CHECK: cuda.kernel @k: readonly has 1 entries for 2 arguments

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [] readonly [] includes ["cuda_bf16.h>\0A#define X"] source "k"
// CHECK: cuda.kernel @k: 'cuda_bf16.h>

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

cuda.kernel @k grid 1 block 32 smem 0 args [memref<4xf32>, memref<4xf32>] readonly [true, false] includes [] source "k"
func.func @forward(%x: memref<4xf32>) {
  cuda.launch @k(%x) : (memref<4xf32>) -> ()
  func.return
}
// CHECK: cuda.launch: '@k' takes 2 arguments, got 1

// -----

cuda.kernel @k grid 1 block 32 smem 0 args [memref<4xf32>] readonly [false] includes [] source "k"
func.func @forward(%x: memref<8xf32>) {
  cuda.launch @k(%x) : (memref<8xf32>) -> ()
  func.return
}
// CHECK: cuda.launch: argument 0 of '@k' has type memref<8xf32>, expected memref<4xf32>
