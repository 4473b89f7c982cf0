// RUN: deplodock-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @dim(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = tensor.scan add %a dim 2 : tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}
// CHECK: tensor.scan: dim 2 out of range for rank 2

// -----

func.func @type(%a: tensor<4x8xf32>) -> tensor<4x8xf16> {
  %s = "tensor.scan"(%a) <{kind = #tensor<kind add>, dim = 1 : i64}> : (tensor<4x8xf32>) -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
// CHECK: tensor.scan: result type tensor<4x8xf16> must be the input's tensor<4x8xf32>
