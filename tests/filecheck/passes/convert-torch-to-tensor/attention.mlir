// RUN: deplodock-opt %s -p convert-torch-to-tensor | filecheck %s

// Attention is q k^T (the GQA head map `h floordiv 2` sits in the key's index map), one
// elementwise with the scale and the causal mask (tensor.index comparisons, -inf), a safe
// softmax (a fully masked row gives 0), and probs @ v with the same head map.

// CHECK-LABEL: func.func @attention
// CHECK-NEXT:    %[[Q:.*]] = tensor.index_map(%q) [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>] : (tensor<1x4x6x8xf32>) -> tensor<1x4x6x8x6xf32>
// CHECK-NEXT:    %[[K:.*]] = tensor.index_map(%kv) [affine_map<(d0, d1, d2, d3, d4) -> (d0, (d1 floordiv 2), d4, d3)>] : (tensor<1x2x6x8xf32>) -> tensor<1x4x6x8x6xf32>
// CHECK-NEXT:    %[[QK:.*]] = tensor.elementwise(%[[Q]], %[[K]])
// CHECK:           arith.mulf
// CHECK:         %[[SUM:.*]] = tensor.reduce add %[[QK]] dims [3] : tensor<1x4x6x8x6xf32> -> tensor<1x4x6x1x6xf32>
// CHECK-NEXT:    %[[S:.*]] = tensor.index_map(%[[SUM]]) [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0, d3)>]
// CHECK-NEXT:    %[[L:.*]] = tensor.elementwise(%[[S]]) : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
// CHECK-NEXT:    ^bb{{[0-9]+}}(%[[X:.*]]: f32):
// CHECK-NEXT:      %[[SC:.*]] = arith.constant 3.500000e-01 : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.mulf %[[X]], %[[SC]] : f32
// CHECK-NEXT:      %[[KEY:.*]] = tensor.index 3 : index
// CHECK-NEXT:      %[[ROW:.*]] = tensor.index 2 : index
// CHECK-NEXT:      %[[KEEP:.*]] = arith.cmpi sle, %[[KEY]], %[[ROW]] : index
// CHECK-NEXT:      %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      %[[M:.*]] = arith.select %[[KEEP]], %[[Y]], %[[NINF]] : f32
// CHECK-NEXT:      tensor.yield %[[M]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    tensor.reduce max %[[L]] dims [3]
// CHECK:         arith.cmpf oeq
// CHECK:         math.exp
// CHECK:         arith.select
// CHECK:         tensor.reduce add %{{.*}} dims [3]
// CHECK:         arith.divf
// CHECK:         tensor.index_map(%kv) [affine_map<(d0, d1, d2, d3, d4) -> (d0, (d1 floordiv 2), d3, d4)>] : (tensor<1x2x6x8xf32>) -> tensor<1x4x6x6x8xf32>
// CHECK:         tensor.reduce add %{{.*}} dims [3] : tensor<1x4x6x6x8xf32> -> tensor<1x4x6x1x8xf32>
func.func @attention(%q: tensor<1x4x6x8xf32>, %kv: tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32> {
  %r = torch.scaled_dot_product_attention %q, %kv, %kv {is_causal = true, scale = 3.500000e-01 : f64, enable_gqa = true} : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>
  func.return %r : tensor<1x4x6x8xf32>
}

// bf16 attention computes in f32 (one extf per distinct input, one truncf at the end); a
// bool mask selects -inf where it is false. The probabilities are rounded to bf16 (and
// widened back) before @ v, as PyTorch's fused kernels do: both products are 16-bit.
// CHECK-LABEL: func.func @attention_mask
// CHECK-NEXT:    %[[W:.*]] = tensor.elementwise(%q) : (tensor<2x5x8xbf16>) -> tensor<2x5x8xf32> {
// CHECK:           arith.extf
// CHECK-NOT:     arith.extf
// CHECK:         %[[MB:.*]] = tensor.index_map(%m) [affine_map<(d0, d1, d2) -> (d1, d2)>] : (tensor<5x5xi1>) -> tensor<2x5x5xi1>
// CHECK-NEXT:    tensor.elementwise(%{{.*}}, %[[MB]]) : (tensor<2x5x5xf32>, tensor<2x5x5xi1>) -> tensor<2x5x5xf32> {
// CHECK-NEXT:    ^bb{{[0-9]+}}(%[[X:.*]]: f32, %[[KEEP:.*]]: i1):
// CHECK-NEXT:      %[[SC:.*]] = arith.constant 1.250000e-01 : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.mulf %[[X]], %[[SC]] : f32
// CHECK-NEXT:      %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      arith.select %[[KEEP]], %[[Y]], %[[NINF]] : f32
// CHECK:         tensor.reduce max
// CHECK:         tensor.reduce add
// CHECK:         tensor.elementwise(%{{.*}}) : (tensor<2x5x5xf32>) -> tensor<2x5x5xbf16> {
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
// CHECK:         tensor.elementwise(%{{.*}}) : (tensor<2x5x5xbf16>) -> tensor<2x5x5xf32> {
// CHECK:           arith.extf %{{.*}} : bf16 to f32
// CHECK:         tensor.reduce add %{{.*}} dims [2] : tensor<2x5x5x8xf32> -> tensor<2x5x1x8xf32>
// CHECK:         arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT:    tensor.yield %{{.*}} : bf16
func.func @attention_mask(%q: tensor<2x5x8xbf16>, %m: tensor<5x5xi1>) -> tensor<2x5x8xbf16> {
  %r = torch.scaled_dot_product_attention %q, %q, %q, %m {is_causal = false, scale = 1.250000e-01 : f64, enable_gqa = false} : (tensor<2x5x8xbf16>, tensor<2x5x8xbf16>, tensor<2x5x8xbf16>, tensor<5x5xi1>) -> tensor<2x5x8xbf16>
  func.return %r : tensor<2x5x8xbf16>
}

// 20 queries over 20 keys: the keys are padded with zeros to a whole 16-key chunk (32), the
// one form attention runs as one kernel in (`loop-fusion`, `tile-streaming-softmax`); the
// mask is padded too, and a padded key is masked out by its index (key < 20), as the causal
// mask masks by index. Everything after the scores runs over 32 keys.
// CHECK-LABEL: func.func @attention_key_tail
// CHECK-NEXT:    %[[ZEROS:.*]] = tensor.elementwise() : () -> tensor<1x12x8xf32> {
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      tensor.yield %[[Z]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[KV:.*]] = tensor.index_map(%q, %[[ZEROS]]) {{.*}} concat 1 offsets [0, 20] : (tensor<1x20x8xf32>, tensor<1x12x8xf32>) -> tensor<1x32x8xf32>
// CHECK:         tensor.index_map(%[[KV]]) [affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>] : (tensor<1x32x8xf32>) -> tensor<1x20x8x32xf32>
// CHECK:         tensor.reduce add %{{.*}} dims [2] : tensor<1x20x8x32xf32> -> tensor<1x20x1x32xf32>
// CHECK:         tensor.index_map(%m, %{{.*}}) {{.*}} concat 1 offsets [0, 20] : (tensor<20x20xf32>, tensor<20x12xf32>) -> tensor<20x32xf32>
// CHECK:         tensor.elementwise(%{{.*}}, %{{.*}}) : (tensor<1x20x32xf32>, tensor<1x20x32xf32>) -> tensor<1x20x32xf32> {
// CHECK:           %[[KEY:.*]] = tensor.index 2 : index
// CHECK-NEXT:      %[[VALID:.*]] = arith.constant 20 : index
// CHECK-NEXT:      %[[REAL:.*]] = arith.cmpi slt, %[[KEY]], %[[VALID]] : index
// CHECK-NEXT:      %[[Y:.*]] = arith.addf
// CHECK-NEXT:      %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:      arith.select %[[REAL]], %[[Y]], %[[NINF]] : f32
// CHECK:         tensor.reduce max %{{.*}} dims [2] : tensor<1x20x32xf32> -> tensor<1x20x1xf32>
// CHECK:         tensor.index_map(%[[KV]]) [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>] : (tensor<1x32x8xf32>) -> tensor<1x20x32x8xf32>
// CHECK:         tensor.reduce add %{{.*}} dims [2] : tensor<1x20x32x8xf32> -> tensor<1x20x1x8xf32>
func.func @attention_key_tail(%q: tensor<1x20x8xf32>, %m: tensor<20x20xf32>) -> tensor<1x20x8xf32> {
  %r = torch.scaled_dot_product_attention %q, %q, %q, %m {is_causal = false, scale = 3.500000e-01 : f64, enable_gqa = false} : (tensor<1x20x8xf32>, tensor<1x20x8xf32>, tensor<1x20x8xf32>, tensor<20x20xf32>) -> tensor<1x20x8xf32>
  func.return %r : tensor<1x20x8xf32>
}
