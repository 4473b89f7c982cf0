// RUN: deplodock-opt %s -p 'tile-split-k{splits=4 atomic=true}' | filecheck %s

// A 20 x 32 @ 32 x 16 linear without a bias: the sum is stored as it is, so with
// atomic=true the slices add straight into the output instead of a workspace. A new kernel
// @linear_kernel_zero clears the output first; each of the 4 slices then tile.atomic_add's
// its partial sum. No combine kernel, but the 4 additions to an element land in whatever
// order the blocks run. (Unscheduled, every thread runs the whole nest: an atomic_add that
// every thread runs alike counts once per block, as a store would.)

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<20x32xf32>, %p_0_weight: memref<16x32xf32>, %linear: memref<20x16xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        tile.for %i0 = %c0 to 20 {
          tile.for %i1 = %c0 to 16 {
            %add = tile.for %r1 = %c0 to 32 iter_args(%acc = %init) -> (f32) {
              %0 = tile.load %x0[%i0, %r1] : memref<20x32xf32>
              %1 = tile.load %p_0_weight[%i1, %r1] : memref<16x32xf32>
              %2 = arith.mulf %0, %1 : f32
              %3 = arith.addf %acc, %2 : f32
              tile.yield %3 : f32
            }
            tile.store %add, %linear[%i0, %i1] : memref<20x16xf32>
          }
        }
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<20x32xf32> {deplodock.input = "x0"}, %p_0_weight: memref<16x32xf32> {deplodock.param = "0.weight"}) -> memref<20x16xf32> {
    %linear = tile.alloc : memref<20x16xf32>
    tile.launch @linear_kernel(%x0, %p_0_weight, %linear) : (memref<20x32xf32>, memref<16x32xf32>, memref<20x16xf32>) -> ()
    func.return %linear : memref<20x16xf32>
  }
}


// CHECK:      tile.kernel @linear_kernel_zero(%linear: memref<20x16xf32>) {
// CHECK:            %zero = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       tile.store %zero, %linear[%i0, %i1] : memref<20x16xf32>
// CHECK:      tile.kernel @linear_kernel({{.*}}) attributes {schedule = {splits = 4 : i64, split_atomic = 1 : i64}}
// CHECK:          tile.for %s = %c0 to 4 {
// CHECK:                %add = tile.for %r1 = %c0 to 8 iter_args(%acc = %init) -> (f32) {
// CHECK:                tile.atomic_add %add, %linear[%i0, %i1] : memref<20x16xf32>
// CHECK:      func.func @forward
// CHECK-NEXT:   %linear = tile.alloc : memref<20x16xf32>
// CHECK-NEXT:   tile.launch @linear_kernel_zero(%linear)
// CHECK-NEXT:   tile.launch @linear_kernel(%x0, %p_0_weight, %linear)
