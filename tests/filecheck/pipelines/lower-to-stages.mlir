// The stage pipelines on a torch-level RMSNorm: one fused kernel at every level below tensor.
// RUN: deplodock-opt %s -p lower-to-tensor | filecheck %s --check-prefix=TENSOR
// RUN: deplodock-opt %s --pass-pipeline='builtin.module(lower-to-loop)' | filecheck %s --check-prefix=LOOP
// RUN: deplodock-opt %s -p lower-to-kernel | filecheck %s --check-prefix=KERNEL
// RUN: deplodock-opt %s -p lower-to-cuda | filecheck %s --check-prefix=CUDA
// RUN: deplodock-opt %s -p lower-to-kernel -t cuda | filecheck %s --check-prefix=SOURCE
// RUN: deplodock-opt %s -p lower-to-loop --mlir-print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=DUMP

func.func @forward(%x: tensor<1x8x64xf32> {deplodock.input = "x"}, %w: tensor<64xf32> {deplodock.param = "weight"}) -> tensor<1x8x64xf32> {
  %y = torch.rms_norm %x, %w {normalized_shape = array<i64: 64>, eps = 1.0e-06 : f64} : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
  func.return %y : tensor<1x8x64xf32>
}

// TENSOR-NOT: torch.
// TENSOR:     tensor.reduce add

// LOOP:          loop.kernel @y_kernel(%x: memref<1x8x64xf32>, %w: memref<64xf32>, %y: memref<1x8x64xf32>)
// LOOP-NOT:      loop.kernel
// LOOP:          func.func @forward
// LOOP-NEXT:       %y = loop.alloc : memref<1x8x64xf32>
// LOOP-NEXT:       loop.launch @y_kernel(%x, %w, %y)
// LOOP-NEXT:       func.return %y

// KERNEL:        kernel.func @y_kernel({{.*}}) grid 8 block 64 {
// KERNEL-NOT:    kernel.func
// KERNEL:        kernel.launch @y_kernel

// CUDA:          cuda.kernel @y_kernel grid 8 block 64 smem 0
// CUDA-NOT:      cuda.kernel
// CUDA:          cuda.launch @y_kernel

// SOURCE:        extern "C" __global__ void __launch_bounds__(64) y_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y)
// SOURCE:        extern "C" int deplodock_forward(

// DUMP:          IR Dump After convert-torch-to-tensor
// DUMP:          IR Dump After convert-tensor-to-loop
// DUMP:          IR Dump After loop-fusion
