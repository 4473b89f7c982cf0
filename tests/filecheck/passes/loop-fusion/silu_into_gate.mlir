// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

// The MLP of a Llama-style block, down(silu(gate(x0)) * up(x1)), with a hidden size of 320
// (the down projection's output columns) and 64 intermediate features. Fused as the down
// projection's prologue, silu's exp and division would run again for every block of
// output columns (320 > MAX_RECOMPUTING_COLUMNS = 256: at least three blocks; 28 at
// Qwen2.5-7B's 3584), so silu stays with the gate projection it reads, as its epilogue,
// computed once per element; only the cheap `* up` becomes the down projection's prologue.

// CHECK-LABEL: loop.kernel @linear_silu_kernel
// CHECK:         %add = loop.for %r2 = 0 to 320 iter_args
// CHECK:         %[[NEG:.*]] = arith.negf %add : f32
// CHECK-NEXT:    %[[EXP:.*]] = math.exp %[[NEG]] : f32
// CHECK:         loop.store {{.*}}, %silu

// CHECK-LABEL: loop.kernel @linear_kernel_2
// CHECK-NOT:     math.exp
// CHECK:         loop.for %r2 = 0 to 64 iter_args
// CHECK-NEXT:      %[[S:.*]] = loop.load %silu
// CHECK-NEXT:      %[[U:.*]] = loop.load %linear
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[S]], %[[U]] : f32
// CHECK-NEXT:      %[[W:.*]] = loop.load %p_0_weight
// CHECK-NEXT:      %{{.*}} = arith.mulf %[[P]], %[[W]] : f32

// CHECK-LABEL: func.func @forward
// CHECK-COUNT-3: loop.launch
// CHECK-NOT:     loop.launch

builtin.module {
  func.func @forward(%x0: tensor<1x4x320xf32> {deplodock.input = "x0"}, %x1: tensor<1x4x320xf32> {deplodock.input = "x1"}, %p_0_weight: tensor<320x64xf32> {deplodock.param = "0.weight"}, %p_1_weight: tensor<64x320xf32> {deplodock.param = "1.weight"}, %p_2_weight: tensor<64x320xf32> {deplodock.param = "2.weight"}) -> tensor<1x4x320xf32> {
    %linear = tensor.index_map(%x0) [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] : (tensor<1x4x320xf32>) -> tensor<1x4x320x64xf32>
    %linear_1 = tensor.index_map(%p_1_weight) [affine_map<(d0, d1, d2, d3) -> (d3, d2)>] : (tensor<64x320xf32>) -> tensor<1x4x320x64xf32>
    %linear_2 = tensor.elementwise(%linear, %linear_1) : (tensor<1x4x320x64xf32>, tensor<1x4x320x64xf32>) -> tensor<1x4x320x64xf32> {
    ^bb0(%0: f32, %1: f32):
      %2 = arith.mulf %0, %1 : f32
      tensor.yield %2 : f32
    }
    %linear_3 = tensor.reduce add %linear_2 dims [2] : tensor<1x4x320x64xf32> -> tensor<1x4x1x64xf32>
    %linear_4 = tensor.index_map(%linear_3) [affine_map<(d0, d1, d2) -> (d0, d1, 0, d2)>] : (tensor<1x4x1x64xf32>) -> tensor<1x4x64xf32>
    %silu = tensor.elementwise(%linear_4) : (tensor<1x4x64xf32>) -> tensor<1x4x64xf32> {
    ^bb0(%3: f32):
      %4 = arith.negf %3 : f32
      %5 = math.exp %4 : f32
      %6 = arith.constant 1.000000e+00 : f32
      %7 = arith.addf %6, %5 : f32
      %8 = arith.divf %3, %7 : f32
      tensor.yield %8 : f32
    }
    %linear_5 = tensor.index_map(%x1) [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] : (tensor<1x4x320xf32>) -> tensor<1x4x320x64xf32>
    %linear_6 = tensor.index_map(%p_2_weight) [affine_map<(d0, d1, d2, d3) -> (d3, d2)>] : (tensor<64x320xf32>) -> tensor<1x4x320x64xf32>
    %linear_7 = tensor.elementwise(%linear_5, %linear_6) : (tensor<1x4x320x64xf32>, tensor<1x4x320x64xf32>) -> tensor<1x4x320x64xf32> {
    ^bb0(%9: f32, %10: f32):
      %11 = arith.mulf %9, %10 : f32
      tensor.yield %11 : f32
    }
    %linear_8 = tensor.reduce add %linear_7 dims [2] : tensor<1x4x320x64xf32> -> tensor<1x4x1x64xf32>
    %linear_9 = tensor.index_map(%linear_8) [affine_map<(d0, d1, d2) -> (d0, d1, 0, d2)>] : (tensor<1x4x1x64xf32>) -> tensor<1x4x64xf32>
    %mul = tensor.elementwise(%silu, %linear_9) : (tensor<1x4x64xf32>, tensor<1x4x64xf32>) -> tensor<1x4x64xf32> {
    ^bb0(%12: f32, %13: f32):
      %14 = arith.mulf %12, %13 : f32
      tensor.yield %14 : f32
    }
    %linear_10 = tensor.index_map(%mul) [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>] : (tensor<1x4x64xf32>) -> tensor<1x4x64x320xf32>
    %linear_11 = tensor.index_map(%p_0_weight) [affine_map<(d0, d1, d2, d3) -> (d3, d2)>] : (tensor<320x64xf32>) -> tensor<1x4x64x320xf32>
    %linear_12 = tensor.elementwise(%linear_10, %linear_11) : (tensor<1x4x64x320xf32>, tensor<1x4x64x320xf32>) -> tensor<1x4x64x320xf32> {
    ^bb0(%15: f32, %16: f32):
      %17 = arith.mulf %15, %16 : f32
      tensor.yield %17 : f32
    }
    %linear_13 = tensor.reduce add %linear_12 dims [2] : tensor<1x4x64x320xf32> -> tensor<1x4x1x320xf32>
    %linear_14 = tensor.index_map(%linear_13) [affine_map<(d0, d1, d2) -> (d0, d1, 0, d2)>] : (tensor<1x4x1x320xf32>) -> tensor<1x4x320xf32>
    func.return %linear_14 : tensor<1x4x320xf32>
  }
}
