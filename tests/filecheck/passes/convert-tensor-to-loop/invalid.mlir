// RUN: deplodock-opt %s -p convert-tensor-to-loop --verify-diagnostics | filecheck %s

func.func @not_forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
// CHECK: convert-tensor-to-loop: the module has no @forward
