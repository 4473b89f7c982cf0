// RUN: deplodock-opt %s | deplodock-opt | filecheck %s

builtin.module {
  cuda.kernel @scale grid 2 block 64 smem 0 args [memref<128xf32>, memref<128xf32>] readonly [true, false] includes [] source "extern \"C\" __global__ void __launch_bounds__(64) scale(const float* __restrict__ x, float* __restrict__ y) {\n  y[blockIdx.x * 64 + threadIdx.x] = 2.0f * x[blockIdx.x * 64 + threadIdx.x];\n}\n"
  cuda.kernel @empty_args grid 1 block 32 smem 1024 args [] readonly [] includes ["cuda_fp16.h", "cuda_bf16.h"] source "extern \"C\" __global__ void empty_args() {}"
  func.func @forward(%x: memref<128xf32> {deplodock.input = "x"}) -> memref<128xf32> {
    %y = cuda.alloc : memref<128xf32>
    %h = cuda.alloc : memref<2x64xf16>
    cuda.launch @scale(%x, %y) : (memref<128xf32>, memref<128xf32>) -> ()
    cuda.launch @empty_args() : () -> ()
    func.return %y : memref<128xf32>
  }
}

// CHECK:      cuda.kernel @scale grid 2 block 64 smem 0 args [memref<128xf32>, memref<128xf32>] readonly [true, false] includes [] source "extern \22C\22 __global__ void __launch_bounds__(64) scale(const float* __restrict__ x, float* __restrict__ y) {\0A  y[blockIdx.x * 64 + threadIdx.x] = 2.0f * x[blockIdx.x * 64 + threadIdx.x];\0A}\0A"
// CHECK-NEXT: cuda.kernel @empty_args grid 1 block 32 smem 1024 args [] readonly [] includes ["cuda_fp16.h", "cuda_bf16.h"] source "extern \22C\22 __global__ void empty_args() {}"
// CHECK:      %y = cuda.alloc : memref<128xf32>
// CHECK-NEXT: %h = cuda.alloc : memref<2x64xf16>
// CHECK-NEXT: cuda.launch @scale(%x, %y) : (memref<128xf32>, memref<128xf32>) -> ()
// CHECK-NEXT: cuda.launch @empty_args() : () -> ()
// CHECK-NEXT: func.return %y : memref<128xf32>
