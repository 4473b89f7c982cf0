// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @shape(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = tensor.elementwise(%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%x: f32, %y: f32):
    %s = arith.addf %x, %y : f32
    tensor.yield %s : f32
  }
  func.return %e : tensor<4x8xf32>
}
// CHECK: tensor.elementwise: input 1 has shape [8], expected the result shape [4, 8]

// -----

func.func @nargs(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.elementwise(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: f32, %y: f32):
    tensor.yield %x : f32
  }
  func.return %e : tensor<4xf32>
}
// CHECK: tensor.elementwise: body has 2 arguments, expected one per input (1)

// -----

func.func @argtype(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.elementwise(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: f16):
    %y = arith.extf %x : f16 to f32
    tensor.yield %y : f32
  }
  func.return %e : tensor<4xf32>
}
// CHECK: tensor.elementwise: body argument 0 has type f16, expected the input element type f32

// -----

func.func @yieldtype(%a: tensor<4xf32>) -> tensor<4xf16> {
  %e = tensor.elementwise(%a) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%x: f32):
    tensor.yield %x : f32
  }
  func.return %e : tensor<4xf16>
}
// CHECK: tensor.elementwise: body yields f32, expected the result element type f16

// -----

func.func @noyield(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.elementwise(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: f32):
    %y = arith.negf %x : f32
  }
  func.return %e : tensor<4xf32>
}
// CHECK: terminates block in single-block region but is not a terminator

// -----

func.func @yield_outside(%a: f32) {
  tensor.yield %a : f32
}
// CHECK: 'tensor.yield' expects parent op 'tensor.elementwise'

// -----

func.func @reduce_shape(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  %r = tensor.reduce add %a dims [1] : tensor<4x8xf32> -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}
// CHECK: tensor.reduce: result shape [4] must be [4, 1] (reduced dims kept as 1)

// -----

func.func @reduce_sorted(%a: tensor<4x8xf32>) -> tensor<1x1xf32> {
  %r = tensor.reduce add %a dims [1, 0] : tensor<4x8xf32> -> tensor<1x1xf32>
  func.return %r : tensor<1x1xf32>
}
// CHECK: tensor.reduce: dims [1, 0] must be sorted and unique

// -----

func.func @reduce_range(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = tensor.reduce max %a dims [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
// CHECK: tensor.reduce: dim 2 out of range for rank 2

// -----

func.func @map_arity(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %t = tensor.index_map(%a) [affine_map<(d0, d1) -> (d1)>] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}
// CHECK: tensor.index_map: map 0 must have 2 dims, no symbols and 2 results (input rank)

// -----

func.func @map_count(%a: tensor<4xf32>) -> tensor<4xf32> {
  %t = tensor.index_map(%a) [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] : (tensor<4xf32>) -> tensor<4xf32>
  func.return %t : tensor<4xf32>
}
// CHECK: tensor.index_map: 2 maps for 1 inputs

// -----

func.func @map_bounds(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = tensor.index_map(%a) [affine_map<(d0, d1) -> (d0, d1 + 1)>] : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %t : tensor<4x8xf32>
}
// CHECK: tensor.index_map: map 0 result 1 ranges over [1, 8], outside input dim of size 8

// -----

func.func @map_bounds_reshape(%a: tensor<4x8xf32>) -> tensor<40xf32> {
  %t = tensor.index_map(%a) [affine_map<(d0) -> (d0 floordiv 8, d0 mod 8)>] : (tensor<4x8xf32>) -> tensor<40xf32>
  func.return %t : tensor<40xf32>
}
// CHECK: tensor.index_map: map 0 result 0 ranges over [0, 4], outside input dim of size 4

// -----

func.func @concat_bounds(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %c = tensor.index_map(%a, %b) [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>] concat 1 offsets [0, 8] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}
// CHECK: tensor.index_map: map 1 result 1 ranges over [8, 15], outside input dim of size 8

// -----

func.func @concat_missing(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %c = tensor.index_map(%a, %b) [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}
// CHECK: tensor.index_map: several inputs need `concat D offsets`

// -----

func.func @concat_offsets(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<8xf32> {
  %c = tensor.index_map(%a, %b) [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0 - 4)>] concat 0 offsets [4, 0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  func.return %c : tensor<8xf32>
}
// CHECK: tensor.index_map: offsets [4, 0] must start at 0 and ascend strictly below 8

// -----

func.func @map_eltype(%a: tensor<4xf16>) -> tensor<4xf32> {
  %c = tensor.index_map(%a) [affine_map<(d0) -> (d0)>] : (tensor<4xf16>) -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}
// CHECK: tensor.index_map: input 0 element type differs from the result's
