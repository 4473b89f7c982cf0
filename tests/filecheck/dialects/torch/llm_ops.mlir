// RUN: deplodock-opt %s | deplodock-opt | filecheck %s
// RUN: deplodock-opt %s --print-op-generic | deplodock-opt | filecheck %s

// The ops LLMs add (comparisons and bool logic, where, casts, arange, cumsum, gathers,
// attention), printed back in their custom syntax.

// CHECK-LABEL: func.func @forward
func.func @forward(%x: tensor<4x8xf32>, %y: tensor<8xf32>, %ids: tensor<2x3xi64>, %w: tensor<16x8xf32>, %m: tensor<4x8xi1>, %h: tensor<4x8xbf16>, %q: tensor<1x4x6x8xf32>, %kv: tensor<1x2x6x8xf32>, %i32: tensor<5xi32>, %mask: tensor<6x6xi1>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %t = torch.constant {value = 1.000000e+00 : f64} : () -> tensor<i1>
  %t = torch.constant {value = 1.000000e+00 : f64} : () -> tensor<i1>
  // CHECK-NEXT: %cos = torch.cos %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %cos = torch.cos %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %sin = torch.sin %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sin = torch.sin %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %eq = torch.eq %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %eq = torch.eq %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %ne = torch.ne %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %ne = torch.ne %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %lt = torch.lt %ids, %ids : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi1>
  %lt = torch.lt %ids, %ids : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi1>
  // CHECK-NEXT: %le = torch.le %x, %x
  %le = torch.le %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %gt = torch.gt %x, %x
  %gt = torch.gt %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %ge = torch.ge %x, %x
  %ge = torch.ge %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %and = torch.logical_and %eq, %m : (tensor<4x8xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
  %and = torch.logical_and %eq, %m : (tensor<4x8xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
  // CHECK-NEXT: %or = torch.logical_or %and, %t : (tensor<4x8xi1>, tensor<i1>) -> tensor<4x8xi1>
  %or = torch.logical_or %and, %t : (tensor<4x8xi1>, tensor<i1>) -> tensor<4x8xi1>
  // CHECK-NEXT: %not = torch.logical_not %or : (tensor<4x8xi1>) -> tensor<4x8xi1>
  %not = torch.logical_not %or : (tensor<4x8xi1>) -> tensor<4x8xi1>
  // CHECK-NEXT: %where = torch.where %not, %x, %y : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %where = torch.where %not, %x, %y : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %cast = torch.cast %h : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %cast = torch.cast %h : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  // CHECK-NEXT: %cast2 = torch.cast %ids : (tensor<2x3xi64>) -> tensor<2x3xf32>
  %cast2 = torch.cast %ids : (tensor<2x3xi64>) -> tensor<2x3xf32>
  // CHECK-NEXT: %ar = torch.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : () -> tensor<16xi64>
  %ar = torch.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : () -> tensor<16xi64>
  // CHECK-NEXT: %arf = torch.arange {start = 1.000000e+00 : f64, step = 5.000000e-01 : f64} : () -> tensor<6xf32>
  %arf = torch.arange {start = 1.000000e+00 : f64, step = 5.000000e-01 : f64} : () -> tensor<6xf32>
  // CHECK-NEXT: %cs = torch.cumsum %m {dim = 1 : i64} : (tensor<4x8xi1>) -> tensor<4x8xi64>
  %cs = torch.cumsum %m {dim = 1 : i64} : (tensor<4x8xi1>) -> tensor<4x8xi64>
  // CHECK-NEXT: %emb = torch.embedding %w, %ids : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  %emb = torch.embedding %w, %ids : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  // CHECK-NEXT: %idx = torch.index %w, %ids, %ids : (tensor<16x8xf32>, tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xf32>
  %idx = torch.index %w, %ids, %ids : (tensor<16x8xf32>, tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xf32>
  // CHECK-NEXT: %idx1 = torch.index %w, %i32 : (tensor<16x8xf32>, tensor<5xi32>) -> tensor<5x8xf32>
  %idx1 = torch.index %w, %i32 : (tensor<16x8xf32>, tensor<5xi32>) -> tensor<5x8xf32>
  // CHECK-NEXT: %att = torch.scaled_dot_product_attention %q, %kv, %kv {is_causal = true, scale = 3.535500e-01 : f64, enable_gqa = true} : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>
  %att = torch.scaled_dot_product_attention %q, %kv, %kv {is_causal = true, scale = 3.535500e-01 : f64, enable_gqa = true} : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>
  // CHECK-NEXT: %att2 = torch.scaled_dot_product_attention %q, %q, %q, %mask {is_causal = false, scale = 1.250000e-01 : f64, enable_gqa = false} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<6x6xi1>) -> tensor<1x4x6x8xf32>
  %att2 = torch.scaled_dot_product_attention %q, %q, %q, %mask {is_causal = false, scale = 1.250000e-01 : f64, enable_gqa = false} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<6x6xi1>) -> tensor<1x4x6x8xf32>
  func.return %where : tensor<4x8xf32>
}
