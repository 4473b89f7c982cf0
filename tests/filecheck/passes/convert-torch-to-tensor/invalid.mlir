// RUN: deplodock-opt %s -p convert-torch-to-tensor --verify-diagnostics | filecheck %s

// Arithmetic decompositions write float `arith` ops; integer tensors are refused by name.
func.func @int_add(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
  %r = torch.add %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %r : tensor<4xi64>
}
// CHECK: convert-torch-to-tensor: arithmetic on i64 tensors
