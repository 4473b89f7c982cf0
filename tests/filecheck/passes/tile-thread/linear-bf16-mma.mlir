// RUN: deplodock-opt %s -p 'tile-block{bm=64 bn=48},tile-thread' | filecheck %s
// RUN: deplodock-opt %s -p 'tile-block{bm=64 bn=48},tile-thread{mma=0}' | filecheck %s --check-prefix=SIMT

// A bf16 linear (products of two bf16 values summed in fp32) gets the MMA layout by
// default, ready for tile-mma: each thread's cells are m16n8k16 accumulator fragments. The
// default 16 x 16 threads of 4 x 3 cells cannot pair 3 columns, so the heuristic keeps the
// 256 threads as a 32 x 8 grid (4 x 2 warps) of 2 x 6 cells: each warp owns a 16 x 24 tile,
// three MMA tiles side by side. With mma=0 the cells are interleaved rows and columns with
// the threads in 2 x 2 quads, as for fp32.

// CHECK:      schedule = {bm = 64 : i64, bn = 48 : i64, group = 8 : i64, fm = 2 : i64, fn = 6 : i64, mma = 1 : i64, threads = 256 : i64}
// CHECK:      %mm, %mm_1 = tile.thread_tile %t dim 0 of [32, 8] cells 2 mma
// CHECK-NEXT: %nn, %nn_1, %nn_2, %nn_3, %nn_4, %nn_5 = tile.thread_tile %t dim 1 of [32, 8] cells 6 mma

// SIMT:       fm = 4 : i64, fn = 3 : i64, mma = 0 : i64, quads = 1 : i64
// SIMT:       tile.thread_tile %t dim 0 of [16, 16] cells 4 interleaved quads
// SIMT-NEXT:  tile.thread_tile %t dim 1 of [16, 16] cells 3 interleaved quads

builtin.module {
  tile.kernel @linear_kernel(%x0: memref<64x32xbf16>, %p_0_weight: memref<48x32xbf16>, %linear: memref<64x48xbf16>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %init = arith.constant 0.000000e+00 : f32
        tile.for %i0 = %c0 to 64 {
          tile.for %i1 = %c0 to 48 {
            %add = tile.for %r1 = %c0 to 32 iter_args(%acc = %init) -> (f32) {
              %0 = tile.load %x0[%i0, %r1] : memref<64x32xbf16>
              %1 = tile.load %p_0_weight[%i1, %r1] : memref<48x32xbf16>
              %2 = arith.extf %0 : bf16 to f32
              %3 = arith.extf %1 : bf16 to f32
              %4 = arith.mulf %2, %3 : f32
              %5 = arith.addf %acc, %4 : f32
              tile.yield %5 : f32
            }
            %6 = arith.truncf %add : f32 to bf16
            tile.store %6, %linear[%i0, %i1] : memref<64x48xbf16>
          }
        }
      }
    }
    tile.return
  }
  func.func @forward(%x0: memref<64x32xbf16> {deplodock.input = "x0"}, %p_0_weight: memref<48x32xbf16> {deplodock.param = "0.weight"}) -> memref<64x48xbf16> {
    %linear = tile.alloc : memref<64x48xbf16>
    tile.launch @linear_kernel(%x0, %p_0_weight, %linear) : (memref<64x32xbf16>, memref<48x32xbf16>, memref<64x48xbf16>) -> ()
    func.return %linear : memref<64x48xbf16>
  }
}

