// RUN: deplodock-opt %s -p convert-torch-to-tensor --split-input-file --verify-diagnostics | filecheck %s

// Integer tensors have integer arithmetic, but bools have none and transcendentals need
// floats: both are refused by name.
func.func @bool_add(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %r = torch.add %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return %r : tensor<4xi1>
}
// CHECK: convert-torch-to-tensor: arithmetic on i1 tensors

// -----

func.func @int_exp(%a: tensor<4xi64>) -> tensor<4xi64> {
  %r = torch.exp %a : (tensor<4xi64>) -> tensor<4xi64>
  func.return %r : tensor<4xi64>
}
// CHECK: convert-torch-to-tensor: math.exp needs a float tensor, got i64
