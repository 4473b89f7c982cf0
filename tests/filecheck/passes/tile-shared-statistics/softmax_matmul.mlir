// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=16 bn=32},tile-thread{fm=2 fn=2},tile-shared-statistics' | filecheck %s
// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=16 bn=96},tile-thread{fm=1 fn=4},tile-shared-statistics' | filecheck %s --check-prefix=PARTIAL
// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=16 bn=32},tile-thread{fm=2 fn=2},tile-shared-statistics{enable=0}' | filecheck %s --check-prefix=OFF
// RUN: deplodock-opt %s -p 'convert-loop-to-tile,tile-block{bm=16 bn=32},tile-thread{fm=2 fn=2},tile-shared-statistics,tile-chunk-k{bk=8},tile-stage,convert-tile-to-kernel' -t cuda | filecheck %s --check-prefix=CUDA

// softmax(x) @ w over 40 keys and 96 columns, as loop-fusion leaves it: the row max and the
// row sum are loops between the output loops (row statistics). After tile-thread each of
// the 128 threads computes them for its 2 rows, and the 16 threads of a row all do.
//
// tile-shared-statistics gives the block's 16 rows to its 4 warps, 4 rows each (%rr):
// lane l holds keys l and l + 32 of the row (the second only for lanes below 8: %has1,
// clamped to %in1), loaded once for both statistics; tile.combine reduces over the warp
// (the sum reads the combined max), lane 0 writes stats_s[statistic, row], and after the
// barrier each cell reads its row's values. The K loop no longer holds any loop of its own.

// CHECK-LABEL: tile.kernel @matmul_kernel
// CHECK-SAME:    shared_statistics = 1
// CHECK:         %mm, %mm_1 = tile.thread_tile %t dim 0 of [8, 16] cells 2
// CHECK:         %stats_s = tile.shared_alloc {statistics} : memref<2x16xf32, 3 : i64>
// CHECK-NEXT:    %warp = arith.floordivsi %t, %c32 : index
// CHECK-NEXT:    %lane = arith.remsi %t, %c32 : index
// CHECK-NEXT:    %is_lead = arith.cmpi eq, %lane, %c0 : index
// CHECK-NEXT:    tile.for %rr = %c0 to 4 {
// CHECK-NEXT:      %[[R4:.*]] = arith.muli %rr, %c4 : index
// CHECK-NEXT:      %sr = arith.addi %[[R4]], %warp : index
// CHECK-NEXT:      %[[ROW:.*]] = arith.addi %m0, %sr : index
// CHECK-NEXT:      %r11 = arith.addi %lane, %c32 : index
// CHECK-NEXT:      %has1 = arith.cmpi slt, %r11, %c40 : index
// CHECK-NEXT:      %in1 = arith.minsi %r11, %c39 : index
// CHECK-NEXT:      %[[X0:.*]] = tile.load %x0[%[[ROW]], %lane]
// CHECK-NEXT:      %[[M0:.*]] = arith.maximumf %init_1, %[[X0]] : f32
// CHECK-NEXT:      %[[X1:.*]] = tile.load %x0[%[[ROW]], %in1]
// CHECK-NEXT:      %[[M1:.*]] = arith.maximumf %[[M0]], %[[X1]] : f32
// CHECK-NEXT:      %max_p = arith.select %has1, %[[M1]], %[[M0]] : f32
// CHECK-NEXT:      %max = tile.combine max %max_p width 32 : f32
// CHECK-NEXT:      arith.subf %[[X0]], %max : f32
// CHECK-NOT:       tile.load
// CHECK:           arith.subf %[[X1]], %max : f32
// CHECK:           %add = tile.combine add %add_p width 32 : f32
// CHECK-NEXT:      tile.if %is_lead {
// CHECK-NEXT:        tile.store %max, %stats_s[%c0, %sr]
// CHECK-NEXT:        tile.store %add, %stats_s[%c1, %sr]
// CHECK:         tile.barrier
// CHECK-NEXT:    %max_1 = tile.load %stats_s[%c0, %mm]
// CHECK-NEXT:    %add_1 = tile.load %stats_s[%c1, %mm]
// CHECK-NEXT:    %max_2 = tile.load %stats_s[%c0, %mm_1]
// CHECK-NEXT:    %add_2 = tile.load %stats_s[%c1, %mm_1]
// CHECK:         tile.for %r1 = %c0 to 40 iter_args
// CHECK-NOT:       tile.for
// CHECK:           arith.subf %{{.*}}, %max_1 : f32
// CHECK:         tile.return

// 16 rows on 12 warps: two trips, the second for warps 0..3 only; the others recompute the
// last row (every lane of a warp takes part in its combine) and do not store it.
// PARTIAL:       tile.for %rr = %c0 to 2 {
// PARTIAL:         %sr = arith.addi %{{.*}}, %warp : index
// PARTIAL-NEXT:    %in_rows = arith.cmpi slt, %sr, %c16 : index
// PARTIAL-NEXT:    %lead_in_rows = arith.andi %is_lead, %in_rows : i1
// PARTIAL-NEXT:    %sr_in = arith.minsi %sr, %c15 : index
// PARTIAL:         tile.if %lead_in_rows {
// PARTIAL-NEXT:      tile.store %max, %stats_s[%c0, %sr_in]

// With enable=0 every thread keeps computing its own rows' statistics.
// OFF:           shared_statistics = 0
// OFF-NOT:       tile.shared_alloc
// OFF:           %max = tile.for %r1 = %c0 to 40
// OFF:           %max_1 = tile.for %r1_1 = %c0 to 40

// The emitted C: warp shuffles for the combines, and the staged copy of p = exp(x - max) / sum
// reads the statistics from shared memory.
// CUDA:          __shared__ float stats_s[32];
// CUDA:          for (int rr = 0; rr < 4; ++rr) {
// CUDA:            const float v0 = x0[m_2 * 40 + lane];
// CUDA:            const float v2 = x0[m_2 * 40 + (r11 < 39 ? r11 : 39)];
// CUDA:            __shfl_xor_sync(0xffffffffu, max_p, 16);
// CUDA-NOT:        x0[
// CUDA:            if (is_lead) {
// CUDA-NEXT:         stats_s[sr] = max_1;
// CUDA-NEXT:         stats_s[16 + sr] = add;
// CUDA:          __syncthreads();
// CUDA:          for (int ko = 0; ko < 40; ko += 8) {
// CUDA:            const float max_2 = stats_s[row];
// CUDA-NEXT:       const float add_1 = stats_s[16 + row];

builtin.module {
  loop.kernel @matmul_kernel(%x0: memref<32x40xf32>, %x1: memref<40x96xf32>, %matmul: memref<32x96xf32>) {
    %init = arith.constant 0.000000e+00 : f32
    %0 = arith.constant 1.000000e+00 : f32
    %init_1 = arith.constant 0xff800000 : f32
    loop.for %i0 = 0 to 32 {
      %max = loop.for %r1 = 0 to 40 iter_args(%acc = %init_1) -> (f32) {
        %1 = loop.load %x0[%i0, %r1] : memref<32x40xf32>
        %2 = arith.maximumf %acc, %1 : f32
        loop.yield %2 : f32
      }
      %add = loop.for %r1_1 = 0 to 40 iter_args(%acc_1 = %init) -> (f32) {
        %3 = loop.load %x0[%i0, %r1_1] : memref<32x40xf32>
        %4 = arith.subf %3, %max : f32
        %5 = math.exp %4 : f32
        %6 = arith.addf %acc_1, %5 : f32
        loop.yield %6 : f32
      }
      %7 = arith.divf %0, %add : f32
      loop.for %i1 = 0 to 96 {
        %add_1 = loop.for %r1_2 = 0 to 40 iter_args(%acc_2 = %init) -> (f32) {
          %8 = loop.load %x0[%i0, %r1_2] : memref<32x40xf32>
          %9 = arith.subf %8, %max : f32
          %10 = math.exp %9 : f32
          %11 = arith.mulf %10, %7 : f32
          %12 = loop.load %x1[%r1_2, %i1] : memref<40x96xf32>
          %13 = arith.mulf %11, %12 : f32
          %14 = arith.addf %acc_2, %13 : f32
          loop.yield %14 : f32
        }
        loop.store %add_1, %matmul[%i0, %i1] : memref<32x96xf32>
      }
    }
    loop.return
  }
  func.func @forward(%x0: memref<32x40xf32> {deplodock.input = "x0"}, %x1: memref<40x96xf32> {deplodock.input = "x1"}) -> memref<32x96xf32> {
    %matmul = loop.alloc : memref<32x96xf32>
    loop.launch @matmul_kernel(%x0, %x1, %matmul) : (memref<32x40xf32>, memref<40x96xf32>, memref<32x96xf32>) -> ()
    func.return %matmul : memref<32x96xf32>
  }
}
