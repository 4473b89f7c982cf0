// RUN: deplodock-opt %s -p convert-tensor-to-loop,loop-fusion | filecheck %s

// GroupNorm (2 groups of 2 channels): the mean, its correction and the variance are three
// reductions over a group's 8 elements, each also read by the normalisation, whose loops
// run over channels (two per group): cloned there they would be redone per channel, so
// they stay its inputs. The variance's kernel takes the other two over (it computes them
// and stores them for the normalisation): the statistics are one kernel with three outputs,
// not three kernels.
func.func @forward(%x0: tensor<2x4x2x2xf32>) -> tensor<2x4x2x2xf32> {
  %0 = tensor.index_map(%x0) [affine_map<(d0, d1, d2) -> (d0, (((d1 * 8) + d2) floordiv 4), ((((d1 * 8) + d2) floordiv 2) mod 2), (((d1 * 8) + d2) mod 2))>] : (tensor<2x4x2x2xf32>) -> tensor<2x2x8xf32>
  %1 = tensor.reduce add %0 dims [2] : tensor<2x2x8xf32> -> tensor<2x2x1xf32>
  %2 = tensor.elementwise(%1) : (tensor<2x2x1xf32>) -> tensor<2x2x1xf32> {
  ^bb0(%3: f32):
    %4 = arith.constant 1.250000e-01 : f32
    %5 = arith.mulf %3, %4 : f32
    tensor.yield %5 : f32
  }
  %6 = tensor.index_map(%2) [affine_map<(d0, d1, d2) -> (d0, d1, 0)>] : (tensor<2x2x1xf32>) -> tensor<2x2x8xf32>
  %7 = tensor.elementwise(%0, %6) : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
  ^bb0(%8: f32, %9: f32):
    %10 = arith.subf %8, %9 : f32
    tensor.yield %10 : f32
  }
  %11 = tensor.reduce add %7 dims [2] : tensor<2x2x8xf32> -> tensor<2x2x1xf32>
  %12 = tensor.elementwise(%2, %11) : (tensor<2x2x1xf32>, tensor<2x2x1xf32>) -> tensor<2x2x1xf32> {
  ^bb0(%13: f32, %14: f32):
    %15 = arith.constant 1.250000e-01 : f32
    %16 = arith.mulf %14, %15 : f32
    %17 = arith.addf %13, %16 : f32
    tensor.yield %17 : f32
  }
  %18 = tensor.index_map(%12) [affine_map<(d0, d1, d2) -> (d0, d1, 0)>] : (tensor<2x2x1xf32>) -> tensor<2x2x8xf32>
  %19 = tensor.elementwise(%0, %18) : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
  ^bb0(%20: f32, %21: f32):
    %22 = arith.subf %20, %21 : f32
    tensor.yield %22 : f32
  }
  %23 = tensor.elementwise(%19) : (tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
  ^bb0(%24: f32):
    %25 = arith.mulf %24, %24 : f32
    tensor.yield %25 : f32
  }
  %26 = tensor.reduce add %23 dims [2] : tensor<2x2x8xf32> -> tensor<2x2x1xf32>
  %27 = tensor.elementwise(%26) : (tensor<2x2x1xf32>) -> tensor<2x2x1xf32> {
  ^bb0(%28: f32):
    %29 = arith.constant 1.250000e-01 : f32
    %30 = arith.mulf %28, %29 : f32
    %31 = arith.constant 1.000000e-05 : f32
    %32 = arith.addf %30, %31 : f32
    %33 = math.rsqrt %32 : f32
    tensor.yield %33 : f32
  }
  %34 = tensor.index_map(%27) [affine_map<(d0, d1, d2) -> (d0, d1, 0)>] : (tensor<2x2x1xf32>) -> tensor<2x2x8xf32>
  %35 = tensor.elementwise(%19, %34) : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
  ^bb0(%36: f32, %37: f32):
    %38 = arith.mulf %36, %37 : f32
    tensor.yield %38 : f32
  }
  %group_norm = tensor.index_map(%35) [affine_map<(d0, d1, d2, d3) -> (d0, ((((d1 * 4) + (d2 * 2)) + d3) floordiv 8), ((((d1 * 4) + (d2 * 2)) + d3) mod 8))>] : (tensor<2x2x8xf32>) -> tensor<2x4x2x2xf32>
  func.return %group_norm : tensor<2x4x2x2xf32>
}

// CHECK:      loop.kernel @reduce_kernel(%x0: memref<2x4x2x2xf32>, %0: memref<2x2x1xf32>, %1: memref<2x2x1xf32>, %2: memref<2x2x1xf32>) {
// CHECK:        loop.for %i0 = 0 to 2 {
// CHECK-NEXT:     loop.for %i1 = 0 to 2 {
// CHECK:            %add = loop.for %r2 = 0 to 8
// CHECK:            loop.store %add, %0[%i0, %i1, %c0]
// CHECK:            %add_1 = loop.for %r2_1 = 0 to 8
// CHECK:            loop.store %add_1, %1[%i0, %i1, %c0]
// CHECK:            %add_2 = loop.for %r2_2 = 0 to 8
// CHECK:            loop.store %add_2, %2[%i0, %i1, %c0]
// CHECK:      loop.kernel @group_norm_kernel(%x0: memref<2x4x2x2xf32>, %0: memref<2x2x1xf32>, %1: memref<2x2x1xf32>, %2: memref<2x2x1xf32>, %group_norm: memref<2x4x2x2xf32>) {
// CHECK-NOT:    iter_args
// CHECK:      func.func @forward
// CHECK-NEXT:   %0 = loop.alloc : memref<2x2x1xf32>
// CHECK-NEXT:   %1 = loop.alloc : memref<2x2x1xf32>
// CHECK-NEXT:   %2 = loop.alloc : memref<2x2x1xf32>
// CHECK-NEXT:   loop.launch @reduce_kernel(%x0, %0, %1, %2)
// CHECK-NEXT:   %group_norm = loop.alloc
// CHECK-NEXT:   loop.launch @group_norm_kernel(%x0, %0, %1, %2, %group_norm)
// CHECK-NEXT:   func.return %group_norm
