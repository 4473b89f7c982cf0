// RUN: deplodock-opt %s -p loop-fusion | filecheck %s --check-prefix=FUSE
// RUN: deplodock-opt %s -p 'loop-fusion{max-recompute=1}' | filecheck %s --check-prefix=KEEP

// exp(x) @ w: inlining the exp into the matmul recomputes it for every output column.
// The default budget (8x) accepts that; max-recompute=1 refuses and keeps two kernels.
builtin.module {
  loop.kernel @p(%x: memref<16x16xf32>, %e: memref<16x16xf32>) {
    loop.for %i = 0 to 16 {
      loop.for %j = 0 to 16 {
        %v = loop.load %x[%i, %j] : memref<16x16xf32>
        %w = math.exp %v : f32
        loop.store %w, %e[%i, %j] : memref<16x16xf32>
      }
    }
    loop.return
  }
  loop.kernel @mm(%e: memref<16x16xf32>, %w: memref<16x16xf32>, %y: memref<16x16xf32>) {
    %zero = arith.constant 0.000000e+00 : f32
    loop.for %i = 0 to 16 {
      loop.for %j = 0 to 16 {
        %s = loop.for %k = 0 to 16 iter_args(%acc = %zero) -> (f32) {
          %a = loop.load %e[%i, %k] : memref<16x16xf32>
          %b = loop.load %w[%k, %j] : memref<16x16xf32>
          %m = arith.mulf %a, %b : f32
          %n = arith.addf %acc, %m : f32
          loop.yield %n : f32
        }
        loop.store %s, %y[%i, %j] : memref<16x16xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x: memref<16x16xf32>, %w: memref<16x16xf32>) -> memref<16x16xf32> {
    %e = loop.alloc : memref<16x16xf32>
    loop.launch @p(%x, %e) : (memref<16x16xf32>, memref<16x16xf32>) -> ()
    %y = loop.alloc : memref<16x16xf32>
    loop.launch @mm(%e, %w, %y) : (memref<16x16xf32>, memref<16x16xf32>, memref<16x16xf32>) -> ()
    func.return %y : memref<16x16xf32>
  }
}

// FUSE:      builtin.module {
// FUSE-NEXT:   loop.kernel @mm_kernel(%x: memref<16x16xf32>, %w: memref<16x16xf32>, %y: memref<16x16xf32>) {
// FUSE:            %s = loop.for %k = 0 to 16 iter_args(%acc = %zero) -> (f32) {
// FUSE-NEXT:         %v = loop.load %x[%i, %k] : memref<16x16xf32>
// FUSE-NEXT:         %w_1 = math.exp %v : f32
// FUSE-NEXT:         %b = loop.load %w[%k, %j] : memref<16x16xf32>
// FUSE:        func.func @forward
// FUSE-NEXT:     %y = loop.alloc : memref<16x16xf32>
// FUSE-NEXT:     loop.launch @mm_kernel(%x, %w, %y)
// FUSE-NEXT:     func.return %y

// KEEP:      loop.kernel @p_kernel(%x: memref<16x16xf32>, %e: memref<16x16xf32>) {
// KEEP:      loop.kernel @mm_kernel(%e: memref<16x16xf32>, %w: memref<16x16xf32>, %y: memref<16x16xf32>) {
// KEEP:            %a = loop.load %e[%i, %k] : memref<16x16xf32>
// KEEP:      func.func @forward
// KEEP-NEXT:   %e = loop.alloc : memref<16x16xf32>
// KEEP-NEXT:   loop.launch @p_kernel(%x, %e)
// KEEP-NEXT:   %y = loop.alloc : memref<16x16xf32>
// KEEP-NEXT:   loop.launch @mm_kernel(%e, %w, %y)
