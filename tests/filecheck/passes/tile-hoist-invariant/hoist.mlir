// RUN: deplodock-opt %s -p tile-hoist-invariant | filecheck %s

// Loop-invariant work moves to just before its tile.for: pure arith/math on values from
// outside, and loads of global buffers the kernel never writes, when the load cannot go
// out of bounds there (every thread runs the loop at least once, or its indices are
// provably in bounds). Inner loops first, so an op climbs every level it is invariant in.
//
// @scale: %s (arith on values from outside) and %w (a load of the read-only %g; the loop
//   runs 16 times for every thread) leave the loop; the loads of %x[%i] stay.
// @nested: %row depends only on %i: it leaves the %j loop, not the %i loop. %two leaves
//   both loops (it climbs two levels).
// @guarded: the loop starts at %t and ends at 40 in a block of 64 threads, so threads 40..63
//   run it zero times: %k = %t + 30 is pure and moves, but the load %g[%k] would read out of
//   bounds for them (%k up to 93 > 69), so it stays. %g[%c5] is provably in bounds: it moves.
// @kept: never hoisted: a load of a buffer the kernel writes (%y), a load of shared memory,
//   a tile.combine, a store, a division by a value that may be zero, anything in a tile.if.

builtin.module {
  tile.kernel @scale(%x: memref<16x32xf32>, %g: memref<8xf32>, %y: memref<16x32xf32>) {
    tile.grid %b to 8 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %half = arith.constant 5.000000e-01 : f32
        %gb = tile.load %g[%b] : memref<8xf32>
        tile.for %i = %c0 to 16 {
          %s = arith.mulf %gb, %half : f32
          %w = tile.load %g[%b] : memref<8xf32>
          %v = tile.load %x[%i, %t] : memref<16x32xf32>
          %o = arith.mulf %v, %s : f32
          %o2 = arith.addf %o, %w : f32
          tile.store %o2, %y[%i, %t] : memref<16x32xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @nested(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %c8 = arith.constant 8 : index
        tile.for %i = %c0 to 4 {
          tile.for %j = %c0 to 8 {
            %row = arith.muli %i, %c8 : index
            %two = arith.constant 2.000000e+00 : f32
            %lin = arith.addi %row, %j : index
            %v = tile.load %x[%i, %j] : memref<4x8xf32>
            %o = arith.mulf %v, %two : f32
            tile.store %o, %y[%i, %j] : memref<4x8xf32>
          }
        }
      }
    }
    tile.return
  }
  tile.kernel @guarded(%x: memref<40xf32>, %g: memref<70xf32>, %y: memref<40xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 64 {
        %c5 = arith.constant 5 : index
        %c30 = arith.constant 30 : index
        tile.for %i = %t to 40 step 64 {
          %k = arith.addi %t, %c30 : index
          %gk = tile.load %g[%k] : memref<70xf32>
          %g5 = tile.load %g[%c5] : memref<70xf32>
          %v = tile.load %x[%i] : memref<40xf32>
          %o = arith.addf %v, %gk : f32
          %o2 = arith.addf %o, %g5 : f32
          tile.store %o2, %y[%i] : memref<40xf32>
        }
      }
    }
    tile.return
  }
  tile.kernel @kept(%x: memref<4x32xf32>, %n: memref<1xindex>, %y: memref<4x32xf32>) {
    tile.grid %b to 1 {
      tile.threads %t to 32 {
        %c0 = arith.constant 0 : index
        %c1 = arith.constant 1 : index
        %s = tile.shared_alloc : memref<32xf32, 3>
        %d = tile.load %n[%c0] : memref<1xindex>
        %is_t0 = arith.cmpi eq, %t, %c0 : index
        tile.for %i = %c0 to 4 {
          %v = tile.load %x[%i, %t] : memref<4x32xf32>
          tile.store %v, %s[%t] : memref<32xf32, 3>
          tile.barrier
          %y0 = tile.load %y[%c0, %c0] : memref<4x32xf32>
          %sh = tile.load %s[%c0] : memref<32xf32, 3>
          %tot = tile.combine add %y0 : f32
          %q = arith.divsi %c1, %d : index
          tile.if %is_t0 {
            %one = arith.constant 1.000000e+00 : f32
            tile.store %one, %y[%q, %c0] : memref<4x32xf32>
          }
          %o = arith.addf %sh, %tot : f32
          tile.barrier
          tile.store %o, %y[%i, %t] : memref<4x32xf32>
        }
      }
    }
    tile.return
  }
}

// CHECK-LABEL: tile.kernel @scale(
// CHECK:             %gb = tile.load %g[%b] : memref<8xf32>
// CHECK-NEXT:        %s = arith.mulf %gb, %half : f32
// CHECK-NEXT:        %w = tile.load %g[%b] : memref<8xf32>
// CHECK-NEXT:        tile.for %i = %c0 to 16 {
// CHECK-NEXT:          %v = tile.load %x[%i, %t] : memref<16x32xf32>

// CHECK-LABEL: tile.kernel @nested(
// CHECK:             %two = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:        tile.for %i = %c0 to 4 {
// CHECK-NEXT:          %row = arith.muli %i, %c8 : index
// CHECK-NEXT:          tile.for %j = %c0 to 8 {
// CHECK-NEXT:            %lin = arith.addi %row, %j : index

// CHECK-LABEL: tile.kernel @guarded(
// CHECK:             %k = arith.addi %t, %c30 : index
// CHECK-NEXT:        %g5 = tile.load %g[%c5] : memref<70xf32>
// CHECK-NEXT:        tile.for %i = %t to 40 step 64 {
// CHECK-NEXT:          %gk = tile.load %g[%k] : memref<70xf32>

// CHECK-LABEL: tile.kernel @kept(
// CHECK:             tile.for %i = %c0 to 4 {
// CHECK-NEXT:          %v = tile.load %x[%i, %t] : memref<4x32xf32>
// CHECK-NEXT:          tile.store %v, %s[%t] : memref<32xf32, 3 : i64>
// CHECK-NEXT:          tile.barrier
// CHECK-NEXT:          %y0 = tile.load %y[%c0, %c0] : memref<4x32xf32>
// CHECK-NEXT:          %sh = tile.load %s[%c0] : memref<32xf32, 3 : i64>
// CHECK-NEXT:          %tot = tile.combine add %y0 : f32
// CHECK-NEXT:          %q = arith.divsi %c1, %d : index
// CHECK-NEXT:          tile.if %is_t0 {
// CHECK-NEXT:            %one = arith.constant 1.000000e+00 : f32
